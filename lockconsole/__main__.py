from lockconsole.cli.main import main

raise SystemExit(main())
