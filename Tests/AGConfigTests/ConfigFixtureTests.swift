import AGTestSupport
import Testing

@testable import AGConfig

@Suite struct ConfigFixtureTests {
    @Test func fixtureFindsTheShippedConfiguration() {
        #expect(ConfigFiles.unreadableReason(ConfigFixture.shippedConf + "/gateway.yaml") == nil)
        #expect(ConfigFiles.unreadableReason(ConfigFixture.shippedConf + "/tenants/example.yaml") == nil)
    }
}
