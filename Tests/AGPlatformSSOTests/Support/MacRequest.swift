import AGCrypto
import AGFormats
import AGPlatformSSO

/// A simulated Mac's two keys.
struct MacDevice {
    let signingKey: P256.PrivateKey
    let encryptionKey: P256.PrivateKey

    init(signingKey: P256.PrivateKey, encryptionKey: P256.PrivateKey) {
        self.signingKey = signingKey
        self.encryptionKey = encryptionKey
    }

    init() throws {
        try self.init(signingKey: P256.PrivateKey(), encryptionKey: P256.PrivateKey())
    }

    var keys: PlatformSSODeviceKeys {
        PlatformSSODeviceKeys(signingKey: signingKey.publicKey, encryptionKey: encryptionKey.publicKey)
    }

    /// The kid as a Mac sends it: standard base64 with padding.
    var kid: String { Base64.encode(SHA256.hash(signingKey.publicKey.x963Representation)) }
}

/// Members in the order they are written (JSON objects are unordered, but Apple's encoder has
/// an order and a test may want to mimic it).
struct OrderedMembers {
    var pairs: [(String, JSONValue)]

    subscript(name: String) -> JSONValue? {
        get { pairs.first { $0.0 == name }?.1 }
        set {
            if let index = pairs.firstIndex(where: { $0.0 == name }) {
                if let newValue { pairs[index].1 = newValue } else { pairs.remove(at: index) }
            } else if let newValue {
                pairs.append((name, newValue))
            }
        }
    }

    /// Apple's `JSONSerialization` pretty printing: two-space indent, `"key" : value`.
    func pretty() -> String { Self.pretty(pairs, indent: "") }

    private static func pretty(_ pairs: [(String, JSONValue)], indent: String) -> String {
        let inner = indent + "  "
        let lines = pairs.map { name, value -> String in
            let rendered: String
            if case .object(let members) = value {
                rendered = pretty(members.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, indent: inner)
            } else {
                rendered = value.serializedString()
            }
            return inner + JSONValue.string(name).serializedString() + " : " + rendered
        }
        return "{\n" + lines.joined(separator: ",\n") + "\n" + indent + "}"
    }
}

/// A refresh request built and signed the way macOS does it.
struct MacRefreshRequest {
    static let clientID = "aaff1524-fa35-40c5-94e3-2b233c5f2965"
    static let audience = "https://gateway.example.com/psso/token"
    static let now: Int64 = 1_700_000_000

    let device: MacDevice
    var header: OrderedMembers
    var claims: OrderedMembers
    /// Changes the raw r‖s signature before it is encoded (to test shapes the Mac never sends).
    var signatureTransform: @Sendable ([UInt8]) throws -> [UInt8] = { $0 }
    var signingKey: P256.PrivateKey
    /// Compact JSON (sorted keys) instead of Apple's pretty printing.
    var compactJSON = false
    /// Writes `/` as `\/`, as `JSONSerialization` does unless told not to.
    var escapeSlashes = false

    init(device: MacDevice, nonce: String = "A978348D-DEDF-4AF2-94D4-FCC60B6736D0", serverNonce: String = "srv-nonce-1",
         refreshToken: String = "refresh-1", now: Int64 = MacRefreshRequest.now, timesAsStrings: Bool = true) {
        self.device = device
        self.signingKey = device.signingKey
        let apv = ApplePartyInfo.partyVInfo(encryptionKey: device.encryptionKey.publicKey, nonce: Array(nonce.utf8))
        header = OrderedMembers(pairs: [
            ("kid", .string(device.kid)), ("typ", "platformsso-refresh-request+jwt"), ("alg", "ES256"),
        ])
        let time = { (value: Int64) -> JSONValue in timesAsStrings ? .string(String(value)) : .integer(value) }
        claims = OrderedMembers(pairs: [
            ("iat", time(now)),
            ("jwe_crypto", ["alg": "ECDH-ES", "enc": "A256GCM", "apv": .string(Base64.encodeURL(apv))]),
            ("nonce", .string(nonce)),
            ("request_nonce", .string(serverNonce)),
            ("scope", "openid offline_access urn:apple:platformsso"),
            ("refresh_token", .string(refreshToken)),
            ("grant_type", "refresh_token"),
            ("exp", time(now + 300)),
            ("aud", .string(Self.audience)),
            ("client_id", .string(Self.clientID)),
            ("iss", .string(Self.clientID)),
        ])
    }

    /// Replaces `jwe_crypto.apv` with `bytes`.
    mutating func setPartyVInfo(_ bytes: [UInt8]) {
        setCrypto("apv", .string(Base64.encodeURL(bytes)))
    }

    mutating func setCrypto(_ name: String, _ value: JSONValue?) {
        var crypto = claims["jwe_crypto"]!.objectValue!
        crypto[name] = value
        claims["jwe_crypto"] = .object(crypto)
    }

    /// The compact JWS.
    func compact() throws -> String {
        func render(_ members: OrderedMembers) -> [UInt8] {
            let text = compactJSON ? JSONValue.object(Dictionary(members.pairs) { $1 }).serializedString() : members.pretty()
            return Array((escapeSlashes ? text.replacingOccurrences(of: "/", with: "\\/") : text).utf8)
        }
        let signingInput = Base64.encodeURL(render(header)) + "." + Base64.encodeURL(render(claims))
        let signature = try signatureTransform(try signingKey.rawSignature(for: Array(signingInput.utf8)))
        return signingInput + "." + Base64.encodeURL(signature)
    }
}

extension PlatformSSOSettings {
    static let test = PlatformSSOSettings(
        clientID: MacRefreshRequest.clientID,
        audiences: ["https://gateway.example.com/psso/token", "https://gateway.example.com/psso/refresh?tenant=a"],
        issuer: "https://gateway.example.com")
}
