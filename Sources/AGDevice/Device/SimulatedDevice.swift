public import AGCrypto
import AGFormats

/// An App Attest device key as an iOS app holds it: a P-256 key pair bound to one App ID,
/// producing assertions exactly as `DCAppAttestService.generateAssertion` does.
///
/// The key reaches the gateway either through the admin key-import call or through an
/// attestation certified by a test CA (`makeAttestation`, in `SimulatedDevice+Attestation.swift`),
/// since only Apple can certify a real one.
public struct SimulatedDevice: Sendable {
    /// Flags byte of the authenticator data; real devices send `0x40` (attested credential data
    /// bit set, no credential data following).
    public static let assertionFlags: UInt8 = 0x40

    public let teamID: String
    public let bundleID: String
    public let privateKey: P256.PrivateKey
    /// The counter of the last assertion made (0: none yet); the next assertion carries one more.
    public private(set) var counter: UInt32

    /// A device with a fresh key.
    public init(teamID: String, bundleID: String) throws(DeviceError) {
        do {
            self.init(teamID: teamID, bundleID: bundleID, privateKey: try P256.PrivateKey(), counter: 0)
        } catch {
            throw .crypto(error)
        }
    }

    public init(teamID: String, bundleID: String, privateKey: P256.PrivateKey, counter: UInt32) {
        self.teamID = teamID
        self.bundleID = bundleID
        self.privateKey = privateKey
        self.counter = counter
    }

    /// `TEAMID.bundle.id`.
    public var appID: String { "\(teamID).\(bundleID)" }

    /// The uncompressed X9.63 public key (65 bytes).
    public var publicKeyX963: [UInt8] { privateKey.publicKey.x963Representation }

    /// The raw key identifier: SHA-256 of the X9.63 public key.
    public var keyIDBytes: [UInt8] { SHA256.hash(publicKeyX963) }

    /// `keyId` as requests carry it: standard base64 with padding.
    public var keyID: String { Base64.encode(keyIDBytes) }

    /// `keyId` as admin paths carry it: base64url without padding.
    public var keyIDForPath: String { Base64.encodeURL(keyIDBytes) }

    /// An assertion over the challenge string, as the refresh call sends it.
    ///
    /// Advances the counter first, so the assertion carries `counter + 1`. Persist the device
    /// before sending the assertion: a counter the gateway has seen must never be reused.
    public mutating func makeAssertion(challenge: String) throws(DeviceError) -> (assertion: [UInt8], clientDataHash: [UInt8]) {
        let clientDataHash = SHA256.hash(challenge.utf8)
        return (try makeAssertion(clientDataHash: clientDataHash), clientDataHash)
    }

    /// An assertion over arbitrary client data, given as its SHA-256.
    public mutating func makeAssertion(clientDataHash: [UInt8]) throws(DeviceError) -> [UInt8] {
        guard counter < UInt32.max else { throw .counterExhausted }
        counter += 1
        // authenticatorData = rpIdHash (32) || flags (1) || signCount (4, big-endian)
        var authenticatorData = SHA256.hash(appID.utf8)
        authenticatorData.append(Self.assertionFlags)
        authenticatorData += [UInt8(truncatingIfNeeded: counter >> 24), UInt8(truncatingIfNeeded: counter >> 16),
                              UInt8(truncatingIfNeeded: counter >> 8), UInt8(truncatingIfNeeded: counter)]
        // The device signs nonce = SHA256(authenticatorData || clientDataHash) with
        // ECDSA-SHA256: the nonce is the signed message and is hashed once more by the scheme.
        let nonce = SHA256.hash(authenticatorData, clientDataHash)
        let signature: [UInt8]
        do {
            signature = try privateKey.signature(for: nonce)
        } catch {
            throw .crypto(error)
        }
        return CBOREncoder().encode(.map([
            (.text("signature"), .bytes(signature)),
            (.text("authenticatorData"), .bytes(authenticatorData)),
        ]))
    }
}
