import AGCrypto
import AGFormats
import Foundation

/// `Tests/Fixtures/platform-sso-apple.json` (a copy of `../shared/vectors/platform-sso-apple.json`):
/// Apple's published Platform SSO encryption walkthrough, private keys included.
struct AppleVector {
    struct Key {
        let privateKey: P256.PrivateKey
        let x: [UInt8]
        let y: [UInt8]
        let kid: String
    }

    let signingKey: Key
    let encryptionKey: Key
    let ephemeralKey: Key
    let loginRequestJWS: String
    let loginRequestClaims: JSONValue
    let sharedSecret: [UInt8]
    let partyUInfo: [UInt8]
    let partyVInfo: [UInt8]
    let kdfInput: [UInt8]
    let contentKey: [UInt8]
    let responseJWE: String
    let responsePlaintext: JSONValue

    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures")

    static func fixturePath(_ name: String) -> String { directory.appendingPathComponent(name).path }

    static let shared: AppleVector = {
        let data = try! Data(contentsOf: directory.appendingPathComponent("platform-sso-apple.json"))
        let root = try! JSONValue(parsing: [UInt8](data))
        func bytes(_ name: String) -> [UInt8] { Base64.decodeURL(root[name]!.stringValue!)! }
        func key(_ name: String) -> Key {
            let member = root[name]!
            let field = { (field: String) in Base64.decodeURL(member[field]!.stringValue!)! }
            return Key(privateKey: try! P256.PrivateKey(rawRepresentation: field("d")), x: field("x"), y: field("y"),
                       kid: member["kid"]!.stringValue!)
        }
        return AppleVector(
            signingKey: key("deviceSigningKey"), encryptionKey: key("deviceEncryptionKey"), ephemeralKey: key("ephemeralKey"),
            loginRequestJWS: root["loginRequestJWS"]!.stringValue!, loginRequestClaims: root["loginRequestClaims"]!,
            sharedSecret: bytes("sharedSecretZ_b64url"), partyUInfo: bytes("apu_b64url"), partyVInfo: bytes("apv_b64url"),
            kdfInput: bytes("concatKDFInput_b64url"), contentKey: bytes("contentEncryptionKey_b64url"),
            responseJWE: root["responseJWE"]!.stringValue!, responsePlaintext: root["responsePlaintext"]!)
    }()
}

func hex(_ string: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = string.startIndex
    while index < string.endIndex {
        let next = string.index(index, offsetBy: 2)
        bytes.append(UInt8(string[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}
