import AGCrypto
import AGFormats
import Foundation
import Testing

/// The real-device vectors, read from the copy in `Tests/Fixtures/` (the originals live in
/// `../shared/vectors/`; the copy keeps the tests independent of the checkout's surroundings).
enum Vectors {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    struct Assertion: Sendable, CustomTestStringConvertible {
        let source: String
        let appID: String
        let publicKey: P256.PublicKey
        let keyID: [UInt8]
        let clientDataHash: [UInt8]
        let assertion: [UInt8]
        let counter: UInt32
        let previousCounter: UInt32
        var testDescription: String { source }
    }

    struct Attestation: Sendable, CustomTestStringConvertible {
        let source: String
        let appID: String
        let environment: String
        let publicKey: P256.PublicKey
        let keyID: [UInt8]
        let clientDataHash: [UInt8]
        let attestationObject: [UInt8]
        let verifyAt: Date
        var testDescription: String { source }
    }

    private static func root() -> [String: Any] {
        let data = try! Data(contentsOf: directory.appendingPathComponent("app-attest-real-devices.json"))
        return try! JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    static let assertions: [Assertion] = (root()["assertions"] as! [[String: Any]]).map { entry in
        Assertion(
            source: entry["source"] as! String,
            appID: entry["appId"] as! String,
            publicKey: try! P256.PublicKey(pemRepresentation: entry["publicKeyPem"] as! String),
            keyID: Base64.decode(entry["keyId"] as! String)!,
            clientDataHash: SHA256.hash(Base64.decode(entry["clientData"] as! String)!),
            assertion: Base64.decode(entry["assertion"] as! String)!,
            counter: UInt32(entry["counter"] as! Int),
            previousCounter: UInt32(entry["previousCounter"] as! Int))
    }

    static let attestations: [Attestation] = (root()["attestations"] as! [[String: Any]]).map { entry in
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let text = entry["verifyAt"] as! String
        let date = formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text)!
        let clientDataHash = Base64.decode(entry["clientDataHash"] as! String)!
        precondition(clientDataHash == SHA256.hash(Base64.decode(entry["clientData"] as! String)!))
        return Attestation(
            source: entry["source"] as! String,
            appID: entry["appId"] as! String,
            environment: entry["environment"] as! String,
            publicKey: try! P256.PublicKey(pemRepresentation: entry["publicKeyPem"] as! String),
            keyID: Base64.decode(entry["keyId"] as! String)!,
            clientDataHash: clientDataHash,
            attestationObject: Base64.decode(entry["attestationObject"] as! String)!,
            verifyAt: date)
    }

    static let appleRootPEM = try! String(contentsOf: directory.appendingPathComponent("Apple_App_Attestation_Root_CA.pem"),
                                          encoding: .utf8)
}

/// Re-encodes a CBOR value (test data only: used to build variants of real objects).
func encodeCBOR(_ value: CBORValue) -> [UInt8] {
    func head(_ major: UInt8, _ argument: UInt64) -> [UInt8] {
        switch argument {
        case 0..<24: return [major << 5 | UInt8(argument)]
        case 24...0xFF: return [major << 5 | 24, UInt8(argument)]
        case 0x100...0xFFFF: return [major << 5 | 25] + withUnsafeBytes(of: UInt16(argument).bigEndian, Array.init)
        case 0x10000...0xFFFF_FFFF: return [major << 5 | 26] + withUnsafeBytes(of: UInt32(argument).bigEndian, Array.init)
        default: return [major << 5 | 27] + withUnsafeBytes(of: argument.bigEndian, Array.init)
        }
    }
    switch value {
    case .unsigned(let n): return head(0, n)
    case .negative(let n): return head(1, n)
    case .bytes(let b): return head(2, UInt64(b.count)) + b
    case .text(let t): return head(3, UInt64(t.utf8.count)) + Array(t.utf8)
    case .array(let a): return head(4, UInt64(a.count)) + a.flatMap(encodeCBOR)
    case .map(let m): return head(5, UInt64(m.count)) + m.flatMap { encodeCBOR($0.key) + encodeCBOR($0.value) }
    case .bool(let b): return [b ? 0xF5 : 0xF4]
    case .null: return [0xF6]
    case .undefined: return [0xF7]
    }
}

/// Replaces the value of text key `key` in a CBOR map.
func replacing(_ key: String, in map: CBORValue, with value: CBORValue?) -> CBORValue {
    guard case .map(let entries) = map else { return map }
    var result = entries.filter { $0.key != .text(key) }
    if let value { result.append((.text(key), value)) }
    return .map(result)
}

func flippingBit(_ bit: Int, of bytes: [UInt8]) -> [UInt8] {
    var copy = bytes
    copy[bit / 8] ^= UInt8(1 << (bit % 8))
    return copy
}
