// AGGatewayTests
