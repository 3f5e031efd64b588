public import AGCrypto
public import AGFormats
import AGPlatformSSO

/// A Platform SSO refresh request built and signed the way macOS builds it: header and claims
/// pretty-printed by `JSONSerialization` (`"key" : value`, two-space indent, Apple's member
/// order), `kid` in padded standard base64, `iat`/`exp` as numeric strings, `exp = iat + 300`,
/// `aud` the configured token URL, `jwe_crypto.apv` = `len‖"Apple"‖len‖encryption key‖len‖nonce`.
public struct MacRefreshRequest: Sendable {
    /// The request's own `nonce` (a UUID, as macOS sends), echoed in the id_token.
    public let nonce: String
    /// `jwe_crypto.apv` bytes: the response's PartyVInfo must equal them.
    public let partyVInfo: [UInt8]
    /// The header members in the order they are written (tests change them to build the
    /// requests a Mac never sends).
    public var header: [(String, JSONValue)]
    /// The claims in the order they are written.
    public var claims: [(String, JSONValue)]

    /// - Parameters:
    ///   - nonceClaimName: where the server nonce goes (`request_nonce` unless configured otherwise).
    ///   - now: Unix seconds.
    public init(mac: SimulatedMac, clientID: String, audience: String, serverNonce: String, refreshToken: String,
                nonceClaimName: String = "request_nonce", now: Int64, nonce: String = MacRefreshRequest.newNonce()) {
        self.nonce = nonce
        partyVInfo = ApplePartyInfo.partyVInfo(encryptionKey: mac.encryptionKey.publicKey, nonce: Array(nonce.utf8))
        header = [("kid", .string(mac.keyID.canonical)), ("typ", "platformsso-refresh-request+jwt"), ("alg", "ES256")]
        claims = [
            ("iat", .string(String(now))),
            ("jwe_crypto", ["alg": "ECDH-ES", "enc": "A256GCM", "apv": .string(Base64.encodeURL(partyVInfo))]),
            ("nonce", .string(nonce)),
            (nonceClaimName, .string(serverNonce)),
            ("scope", "openid offline_access urn:apple:platformsso"),
            ("refresh_token", .string(refreshToken)),
            ("grant_type", "refresh_token"),
            ("exp", .string(String(now + 300))),
            ("aud", .string(audience)),
            ("client_id", .string(clientID)),
            ("iss", .string(clientID)),
        ]
    }

    /// The compact JWS, signed with the Mac's signing key.
    public func signed(by mac: SimulatedMac) throws(DeviceError) -> String {
        try signed(with: mac.signingKey)
    }

    /// The compact JWS, signed with `key`.
    public func signed(with key: P256.PrivateKey) throws(DeviceError) -> String {
        let headerText = JSONValue.prettyPrintedObject(header, keySeparator: " : ")
        let claimsText = JSONValue.prettyPrintedObject(claims, keySeparator: " : ")
        let signingInput = Base64.encodeURL(Array(headerText.utf8)) + "." + Base64.encodeURL(Array(claimsText.utf8))
        do {
            return signingInput + "." + Base64.encodeURL(try key.rawSignature(for: Array(signingInput.utf8)))
        } catch {
            throw .crypto(error)
        }
    }

    /// A random version 4 UUID in upper case, as `NSUUID().uuidString` writes it.
    public static func newNonce() -> String {
        var bytes = SecureRandom.bytes(count: 16)
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for (index, byte) in bytes.enumerated() {
            if [4, 6, 8, 10].contains(index) { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
