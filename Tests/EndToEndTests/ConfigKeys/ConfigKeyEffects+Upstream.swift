import AGTestSupport
import Foundation
import Testing

extension ConfigKeyEffects {
    /// How upstreams are reached: the resolver for host names and the roots of https upstreams.
    /// Their effects need a DNS server or a TLS upstream, which the upstream suites set up; each
    /// check runs the test named in `observed`.
    static var upstreamReach: [KeyEffect] {
        [
            KeyEffect(key: "gateway:resolver.nameservers",
                      observed: "UpstreamHostNameEndToEndTests: a name only that server knows is proxied; a reload keeps the old servers") {
                try await shared("UpstreamHostNameEndToEndTests.aHostNameIsResolvedByTheConfiguredNameServerAndProxied") {
                    try await UpstreamHostNameEndToEndTests().aHostNameIsResolvedByTheConfiguredNameServerAndProxied()
                }
                try await UpstreamHostNameEndToEndTests().theResolverIsRestartOnly()
            },
            KeyEffect(key: "gateway:resolver.timeout",
                      observed: "UpstreamHostNameEndToEndTests: a silent name server costs a request 3s, then 502") {
                try await UpstreamHostNameEndToEndTests().aSilentNameServerCostsAtMostTheResolverTimeoutAndNeverStallsTheWorker()
            },
            KeyEffect(key: "tenant:upstream_ca",
                      observed: "UpstreamTLSEndToEndTests: with it a test CA's certificate is accepted, without it refused (502)") {
                try await shared("UpstreamTLSEndToEndTests.anHTTPSUpstreamIsVerifiedAgainstUpstreamCAAndItsConnectionsPooled") {
                    try await UpstreamTLSEndToEndTests().anHTTPSUpstreamIsVerifiedAgainstUpstreamCAAndItsConnectionsPooled()
                }
                try await UpstreamTLSEndToEndTests().withoutUpstreamCATheSystemStoreDecidesAndRefusesATestCA()
            },
        ]
    }
}
