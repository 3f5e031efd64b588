// swift-tools-version:6.0
import PackageDescription

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

        // Thin wrappers over the C libraries.
        .target(name: "AGEventLoop", dependencies: ["CEvent", "CShims"]),
        .target(name: "AGCrypto", dependencies: ["COpenSSL", "CShims"]),
        .target(name: "AGRedis", dependencies: ["AGEventLoop", "CHiredis", "CShims"]),
        .target(name: "AGHTTP", dependencies: ["AGEventLoop", "CEvent", "CShims"]),

        // Pure domain code.
        .target(name: "AGFormats"),
        .target(name: "AGJOSE", dependencies: ["AGFormats", "AGCrypto"]),
        .target(name: "AGAppAttest", dependencies: ["AGCrypto", "AGFormats"]),

        // The gateway and the executable.
        .target(name: "AGGateway", dependencies: ["AGCrypto", "AGFormats", "AGJOSE", "AGAppAttest", "AGRedis", "AGHTTP", "CYAML"]),
        .executableTarget(name: "attestgate", dependencies: ["AGGateway"]),

        // The simulated device client: CLI, scripted demo and load generator.
        .target(name: "AGDevice", dependencies: ["AGCrypto", "AGFormats", "AGJOSE"]),
        .executableTarget(name: "attestgate-device", dependencies: ["AGDevice", "AGCrypto"]),

        .testTarget(name: "AGCryptoTests", dependencies: ["AGCrypto", "AGFormats"]),
        .testTarget(name: "AGFormatsTests", dependencies: ["AGFormats"]),
        .testTarget(name: "AGJOSETests", dependencies: ["AGJOSE", "AGFormats", "AGCrypto"]),
        .testTarget(name: "AGAppAttestTests", dependencies: ["AGAppAttest", "AGCrypto", "AGFormats"]),
        .testTarget(name: "AGEventLoopTests", dependencies: ["AGEventLoop", "AGTestSupport"]),
        .testTarget(name: "AGRedisTests", dependencies: ["AGRedis", "AGTestSupport"]),
        .testTarget(name: "AGGatewayTests", dependencies: ["AGGateway", "AGTestSupport", "AGAppAttest", "AGFormats", "AGJOSE", "AGRedis"]),
        .testTarget(name: "EndToEndTests", dependencies: ["AGGateway", "AGTestSupport", "AGCrypto", "AGFormats", "AGJOSE", "AGDevice"]),
        .testTarget(name: "AGHTTPTests", dependencies: ["AGHTTP"]),
        .testTarget(name: "AGDeviceTests", dependencies: ["AGDevice", "AGAppAttest", "AGFormats", "AGCrypto"]),
        .target(name: "AGTestSupport", dependencies: ["AGHTTP", "AGRedis", "AGGateway", "AGCrypto", "AGFormats", "AGJOSE", "AGDevice"], path: "Tests/AGTestSupport"),
    ],
    swiftLanguageModes: [.v6]
)
