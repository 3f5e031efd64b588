// swift-tools-version:6.0
import PackageDescription

// Release builds optimize across modules: generic helpers of one module (base64, JSON, the
// header writer) are specialized and inlined where another calls them per request
// (callgrind: -3 % instructions per proxied request, -2 % of the refresh's own work).
let crossModule: [SwiftSetting] = [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]
let uncheckedExclusivity: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))] + crossModule

let package = Package(
    name: "attestgate",
    products: [
        .executable(name: "attestgate", targets: ["attestgate"]),
        .executable(name: "attestgate-device", targets: ["attestgate-device"]),
    ],
    targets: [
        // C libraries, imported as system modules.
        .systemLibrary(name: "CEvent", pkgConfig: "libevent", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "CHiredis", pkgConfig: "hiredis", providers: [.apt(["libhiredis-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        // What Swift cannot import directly: the hiredis libevent adapter, function-like macros.
        .target(name: "CShims", dependencies: ["CEvent", "CHiredis", "COpenSSL"]),

        // Wrappers: the only Swift code that touches C, Unsafe* or OpaquePointer.
        // AGSync: the package's one lock (on pthread, which ThreadSanitizer understands).
        .target(name: "AGSync", swiftSettings: crossModule),
        .target(name: "AGEventLoop", dependencies: ["AGSync", "CEvent", "CShims"], swiftSettings: crossModule),
        .target(name: "AGCrypto", dependencies: ["AGSync", "COpenSSL", "CShims"], swiftSettings: crossModule),
        .target(name: "AGYAML", dependencies: ["CYAML"], swiftSettings: crossModule),
        .target(name: "AGRedis", dependencies: ["AGEventLoop", "CHiredis", "CShims"], swiftSettings: uncheckedExclusivity),
        .target(name: "AGHTTP", dependencies: ["AGSync", "AGEventLoop", "AGCrypto", "AGFormats", "CEvent", "CShims"], swiftSettings: uncheckedExclusivity),

        // Pure domain code: no sockets, no C, the clock injected.
        .target(name: "AGFormats", swiftSettings: crossModule),
        .target(name: "AGJOSE", dependencies: ["AGFormats", "AGCrypto"], swiftSettings: crossModule),
        .target(name: "AGAppAttest", dependencies: ["AGCrypto", "AGFormats"], swiftSettings: crossModule),
        .target(name: "AGPlatformSSO", dependencies: ["AGCrypto", "AGFormats", "AGJOSE"], swiftSettings: crossModule),
        .target(name: "AGConfig", dependencies: ["AGYAML", "AGFormats", "AGAppAttest", "AGRedis"], swiftSettings: crossModule),
        .target(name: "AGPolicy", dependencies: ["AGConfig", "AGFormats", "AGRedis"], swiftSettings: crossModule),

        // The runtime gateway: workers, routers, handlers, stores, admin API, metrics.
        .target(name: "AGGateway", dependencies: ["AGSync", "AGCrypto", "AGFormats", "AGJOSE", "AGAppAttest", "AGPlatformSSO", "AGRedis", "AGHTTP", "AGConfig", "AGPolicy"], swiftSettings: uncheckedExclusivity),

        // Tools: the test CA and echo upstream (never imported by the serving path), the
        // simulated device and Mac, the fuzz targets (the library is built and replayed by the
        // normal suite; the libFuzzer executable exists only when scripts/fuzz builds with
        // AG_FUZZ=1, see there).
        .target(name: "AGDevTools", dependencies: ["AGCrypto", "AGHTTP", "AGEventLoop", "AGFormats", "COpenSSL"]),
        .target(name: "AGDevice", dependencies: ["AGSync", "AGCrypto", "AGFormats", "AGJOSE", "AGPlatformSSO", "AGDevTools", "AGHTTP"]),
        .target(name: "AGFuzzTargets", dependencies: ["AGFormats", "AGCrypto", "AGJOSE", "AGAppAttest", "AGPlatformSSO", "AGConfig", "AGHTTP", "AGGateway", "AGDevice", "AGDevTools"]),

        // The executables.
        .executableTarget(name: "attestgate", dependencies: ["AGGateway", "AGDevTools"]),
        .executableTarget(name: "attestgate-device", dependencies: ["AGDevice", "AGCrypto", "AGFormats"]),

        // Tests: the shared test plumbing, then one target per module in the order above,
        // then the end-to-end tests against real Redis, sockets and the built binaries.
        .target(name: "AGTestSupport", dependencies: ["AGSync", "AGConfig", "AGPolicy", "AGDevTools", "AGHTTP", "AGRedis", "AGGateway", "AGCrypto", "AGFormats", "AGJOSE", "AGDevice"], path: "Tests/AGTestSupport"),
        .testTarget(name: "AGEventLoopTests", dependencies: ["AGEventLoop", "AGTestSupport"]),
        .testTarget(name: "AGCryptoTests", dependencies: ["AGSync", "AGCrypto", "AGFormats"]),
        .testTarget(name: "AGYAMLTests", dependencies: ["AGYAML"]),
        .testTarget(name: "AGRedisTests", dependencies: ["AGSync", "AGRedis", "AGTestSupport", "CHiredis"]),
        .testTarget(name: "AGHTTPTests", dependencies: ["AGSync", "AGHTTP", "AGDevTools", "AGCrypto", "AGEventLoop", "AGTestSupport"]),
        .testTarget(name: "AGFormatsTests", dependencies: ["AGFormats"]),
        .testTarget(name: "AGJOSETests", dependencies: ["AGJOSE", "AGFormats", "AGCrypto"]),
        .testTarget(name: "AGAppAttestTests", dependencies: ["AGAppAttest", "AGCrypto", "AGFormats"]),
        .testTarget(name: "AGPlatformSSOTests", dependencies: ["AGPlatformSSO", "AGJOSE", "AGCrypto", "AGFormats"]),
        .testTarget(name: "AGConfigTests", dependencies: ["AGConfig", "AGTestSupport", "AGYAML", "AGRedis", "AGFormats", "AGAppAttest"]),
        .testTarget(name: "AGPolicyTests", dependencies: ["AGPolicy", "AGConfig", "AGFormats", "AGRedis", "AGTestSupport"]),
        .testTarget(name: "AGGatewayTests", dependencies: ["AGSync", "AGGateway", "AGConfig", "AGPolicy", "AGPlatformSSO", "AGDevice", "AGCrypto", "AGYAML", "AGTestSupport", "AGAppAttest", "AGFormats", "AGJOSE", "AGRedis"]),
        .testTarget(name: "AGDevToolsTests", dependencies: ["AGDevTools", "AGCrypto"]),
        .testTarget(name: "AGDeviceTests", dependencies: ["AGSync", "AGDevice", "AGDevTools", "AGTestSupport", "AGAppAttest", "AGFormats", "AGCrypto"]),
        .testTarget(name: "AGFuzzTargetsTests", dependencies: ["AGFuzzTargets", "AGTestSupport"]),
        .testTarget(name: "EndToEndTests", dependencies: ["AGSync", "AGGateway", "AGRedis", "AGDevTools", "AGConfig", "AGPolicy", "AGTestSupport", "AGCrypto", "AGFormats", "AGJOSE", "AGPlatformSSO", "AGDevice", "AGYAML", "AGHTTP"]),
    ],
    swiftLanguageModes: [.v6]
)

if Context.environment["AG_FUZZ"] == "1" {
    package.targets.append(.executableTarget(name: "attestgate-fuzz", dependencies: ["AGFuzzTargets"], path: "Fuzz/attestgate-fuzz"))
    package.products.append(.executable(name: "attestgate-fuzz", targets: ["attestgate-fuzz"]))
}
