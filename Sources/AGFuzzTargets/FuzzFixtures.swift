import AGCrypto
import AGDevTools
import AGDevice
import AGFormats
import Foundation

/// Keys, devices and signed objects the targets share: made once per process, so an iteration
/// costs only the code under test.
enum FuzzFixtures {
    static let appID = "ABCDE12345.com.example.app"
    /// "Now" for every time check: fixed, so a seed stays valid however long a run takes.
    static let now: Int64 = 1_700_000_000

    static let tokenKey = try! P256.PrivateKey()
    static let rsaTokenKey = try! RSAKey.PrivateKey(bits: 2048)
    static let deviceKey = try! P256.PrivateKey()
    static let macSigningKey = try! P256.PrivateKey()
    static let macEncryptionKey = try! P256.PrivateKey()
    static let testCA = try! TestCertificateAuthority.generate()

    /// A device of `appID` whose counter stands at 4 (its assertions carry 5, 6, …).
    static var device: SimulatedDevice {
        SimulatedDevice(teamID: "ABCDE12345", bundleID: "com.example.app", privateKey: deviceKey, counter: 4)
    }

    static let challenge = String(repeating: "ab", count: 32)

    /// An assertion over `challenge` with counter 5.
    static let assertion: [UInt8] = {
        var device = FuzzFixtures.device
        return try! device.makeAssertion(challenge: challenge).assertion
    }()

    /// An attestation of `device` by the test CA, over `challenge`.
    static let attestation: [UInt8] = {
        try! FuzzFixtures.device.makeAttestation(challenge: challenge, testCA: testCA, environment: .development,
                                    now: Date(timeIntervalSince1970: TimeInterval(now))).attestationObject
    }()
}

/// CBOR inputs: real App Attest objects and small hand-made shapes.
enum CBORSeeds {
    static var all: [[UInt8]] {
        [FuzzFixtures.assertion, FuzzFixtures.attestation,
         [0xA0], [0x80], [0x9F, 0x01, 0xFF], [0x1B, 0, 0, 0, 0, 0, 0, 0, 1], [0xF9, 0x3C, 0x00], [0xC1, 0x1A, 0, 0, 0, 1],
         [0x7F, 0x61, 0x61, 0xFF], [0x5F, 0x41, 0x00, 0xFF], [0xA1, 0x61, 0x61, 0x81, 0xA1, 0x00, 0x00]]
    }
}
