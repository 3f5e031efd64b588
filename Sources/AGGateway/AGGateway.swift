// AGGateway
