public import AGCrypto
import AGFormats
public import AGPlatformSSO

/// A simulated Mac enrolled in Platform SSO: its two Secure Enclave keys (here software P-256
/// keys), the user it belongs to, and the refresh token it holds.
///
/// Saved as JSON readable by its owner only (`PrivateFile`): the private keys and the refresh
/// token are secrets and are never printed.
public struct SimulatedMac: Sendable {
    /// Version of the state document this code writes and reads.
    static let stateVersion: Int64 = 1

    public let teamID: String
    public let bundleID: String
    /// Signs refresh requests; its key id is the device's `kid`.
    public let signingKey: P256.PrivateKey
    /// Responses are encrypted to it.
    public let encryptionKey: P256.PrivateKey
    /// The user's `sub`, registered with the device.
    public let subject: String
    /// The refresh token of the last login or refresh; nil before the first.
    public var refreshToken: String?

    public var appID: String { "\(teamID).\(bundleID)" }
    public var keys: PlatformSSODeviceKeys {
        PlatformSSODeviceKeys(signingKey: signingKey.publicKey, encryptionKey: encryptionKey.publicKey)
    }
    /// The device id, as a Mac puts it in a JWS `kid` (standard base64, padded).
    public var keyID: PlatformSSOKeyID { keys.keyID }

    public init(teamID: String, bundleID: String, subject: String, signingKey: P256.PrivateKey, encryptionKey: P256.PrivateKey,
                refreshToken: String? = nil) {
        self.teamID = teamID
        self.bundleID = bundleID
        self.subject = subject
        self.signingKey = signingKey
        self.encryptionKey = encryptionKey
        self.refreshToken = refreshToken
    }

    /// A Mac with two fresh keys.
    public init(teamID: String, bundleID: String, subject: String) throws(DeviceError) {
        do {
            self.init(teamID: teamID, bundleID: bundleID, subject: subject, signingKey: try P256.PrivateKey(),
                      encryptionKey: try P256.PrivateKey())
        } catch {
            throw .crypto(error)
        }
    }

    /// Loads the Mac saved at `path`, or nil when there is no file.
    public static func load(from path: String) throws(DeviceError) -> SimulatedMac? {
        let stored: [UInt8]?
        do {
            stored = try PrivateFile.read(path)
        } catch {
            throw .state(path: path, reason: error.reason)
        }
        guard let bytes = stored else { return nil }
        guard let document = try? JSONValue(parsing: bytes) else { throw .state(path: path, reason: "not JSON") }
        func field(_ name: String) throws(DeviceError) -> String {
            guard let value = document[name]?.stringValue, !value.isEmpty else {
                throw .state(path: path, reason: "missing string \(name)")
            }
            return value
        }
        guard document["version"]?.integerValue == stateVersion, document["kind"]?.stringValue == "mac" else {
            throw .state(path: path, reason: "not a simulated Mac state (version \(stateVersion))")
        }
        func key(_ name: String) throws(DeviceError) -> P256.PrivateKey {
            do {
                return try P256.PrivateKey(pemRepresentation: try field(name))
            } catch {
                throw .state(path: path, reason: "\(name) is not a P-256 private key PEM")
            }
        }
        let mac = SimulatedMac(teamID: try field("teamId"), bundleID: try field("bundleId"), subject: try field("sub"),
                               signingKey: try key("signingKey"), encryptionKey: try key("encryptionKey"),
                               refreshToken: document["refreshToken"]?.stringValue)
        // A kid that does not match the key means the file was edited or mixed up.
        guard try field("kid") == mac.keyID.canonical else { throw .state(path: path, reason: "kid does not match signingKey") }
        return mac
    }

    /// Saves the Mac to `path` atomically, readable by its owner only.
    public func save(to path: String) throws(DeviceError) {
        var members: [String: JSONValue] = [
            "version": .integer(Self.stateVersion), "kind": "mac", "teamId": .string(teamID), "bundleId": .string(bundleID),
            "sub": .string(subject), "kid": .string(keyID.canonical),
        ]
        do {
            members["signingKey"] = .string(try signingKey.pemRepresentation())
            members["encryptionKey"] = .string(try encryptionKey.pemRepresentation())
        } catch {
            throw .crypto(error)
        }
        if let refreshToken { members["refreshToken"] = .string(refreshToken) }
        var bytes = JSONValue.object(members).serialized()
        bytes.append(0x0A)
        do {
            try PrivateFile.write(bytes, to: path)
        } catch {
            throw .state(path: path, reason: error.reason)
        }
    }
}
