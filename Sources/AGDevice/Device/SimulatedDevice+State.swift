import AGCrypto
import AGFormats

extension SimulatedDevice {
    /// Version of the state document this code writes and reads.
    static let stateVersion: Int64 = 1

    /// The persistent state: a JSON object holding the private key (PKCS#8 PEM), the counter,
    /// the keyId and the App ID parts, so that separate runs continue one device's counter.
    public func stateDocument() throws(DeviceError) -> JSONValue {
        let pem: String
        do {
            pem = try privateKey.pemRepresentation()
        } catch {
            throw .crypto(error)
        }
        return .object([
            "version": .integer(Self.stateVersion),
            "teamId": .string(teamID),
            "bundleId": .string(bundleID),
            "keyId": .string(keyID),
            "counter": .integer(Int64(counter)),
            "privateKey": .string(pem),
        ])
    }

    /// A device from `stateDocument()`'s output; `source` names it in errors.
    public init(stateDocument document: JSONValue, source: String) throws(DeviceError) {
        func field(_ name: String) throws(DeviceError) -> String {
            guard let value = document[name]?.stringValue, !value.isEmpty else {
                throw .state(path: source, reason: "missing string \(name)")
            }
            return value
        }
        guard document["version"]?.integerValue == Self.stateVersion else {
            throw .state(path: source, reason: "unsupported version (expected \(Self.stateVersion))")
        }
        guard let counter = document["counter"]?.integerValue, let counter = UInt32(exactly: counter) else {
            throw .state(path: source, reason: "counter is not an integer in 0...\(UInt32.max)")
        }
        let pem = try field("privateKey")
        let privateKey: P256.PrivateKey
        do {
            privateKey = try P256.PrivateKey(pemRepresentation: pem)
        } catch {
            throw .state(path: source, reason: "privateKey is not a P-256 private key PEM")
        }
        self.init(teamID: try field("teamId"), bundleID: try field("bundleId"), privateKey: privateKey,
                  counter: counter)
        // A keyId that does not match the key means the file was edited or mixed up.
        guard try field("keyId") == keyID else {
            throw .state(path: source, reason: "keyId does not match the private key")
        }
    }

    /// Loads the device saved at `path`, or nil when there is no file.
    public static func load(from path: String) throws(DeviceError) -> SimulatedDevice? {
        let stored: [UInt8]?
        do {
            stored = try PrivateFile.read(path)
        } catch {
            throw .state(path: path, reason: error.reason)
        }
        guard let bytes = stored else { return nil }
        let document: JSONValue
        do {
            document = try JSONValue(parsing: bytes)
        } catch {
            throw .state(path: path, reason: "\(error)")
        }
        return try SimulatedDevice(stateDocument: document, source: path)
    }

    /// Saves the device to `path` atomically, readable by its owner only.
    public func save(to path: String) throws(DeviceError) {
        var bytes = try stateDocument().serialized()
        bytes.append(0x0A)
        do {
            try PrivateFile.write(bytes, to: path)
        } catch {
            throw .state(path: path, reason: error.reason)
        }
    }
}
