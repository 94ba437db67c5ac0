SELECT inet_server_port(), inet_client_port()
