import Testing

@testable import AGGateway

/// The record keys built from the per-snapshot prefixes are the documented schema's (README,
/// "Redis schema"), every one under the tenant's hash tag.
@Suite struct TenantRecordKeysTests {
    @Test func recordKeysAreTheSchemasSpellings() throws {
        let harness = try RouterHarness()
        let tenant = harness.tenant
        let tag = "ag:{\(tenant.appID)}:"
        #expect(RedisDeviceStore.deviceKey(tenant, "a2V5") == tag + "dev:a2V5")
        #expect(RedisDeviceStore.challengeKey(tenant, "00ff") == tag + "ch:00ff")
        #expect(RedisDeviceStore.subjectKey(tenant, "user-1") == tag + "subj:user-1")
        #expect(RedisDeviceStore.madKey(tenant, "202612") == tag + "mad:202612")
        #expect(RedisDeviceStore.graceKey(tenant, "202612") == tag + "grace:202612")
        #expect(RedisPlatformSSOStore.nonceKey(tenant, "n") == tag + "psso:nonce:n")
        #expect(RedisPlatformSSOStore.familyKey(tenant, "f") == tag + "psso:fam:f")
        #expect(RedisPlatformSSOStore.tokenKey(tenant, "d") == tag + "psso:rt:d")
        #expect(tenant.recordKeys.platformSSODevice == tag + "psso:dev:")
    }
}
