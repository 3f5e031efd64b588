import AGCrypto
import AGFormats
import AGJOSE
import AGPlatformSSO
import Testing

@Suite("Key ids and device key forms")
struct KeyParsingTests {
    static let vectorKid = "Ws9mKynZxyUSNXYtMGAjjLO+Jg16HCa/5pJO0udNWJ4="

    @Test("the four spellings of one kid normalise to Apple's", arguments: [
        "Ws9mKynZxyUSNXYtMGAjjLO+Jg16HCa/5pJO0udNWJ4=",
        "Ws9mKynZxyUSNXYtMGAjjLO+Jg16HCa/5pJO0udNWJ4",
        "Ws9mKynZxyUSNXYtMGAjjLO-Jg16HCa_5pJO0udNWJ4=",
        "Ws9mKynZxyUSNXYtMGAjjLO-Jg16HCa_5pJO0udNWJ4",
    ])
    func spellings(kid: String) throws {
        let normalised = try #require(PlatformSSOKeyID(normalizing: kid))
        #expect(normalised.canonical == Self.vectorKid)
        #expect(normalised.urlSafe == "Ws9mKynZxyUSNXYtMGAjjLO-Jg16HCa_5pJO0udNWJ4")
        #expect(normalised == PlatformSSOKeyID(of: AppleVector.shared.signingKey.privateKey.publicKey))
    }

    @Test("anything that is not one spelling of 32 bytes is refused", arguments: [
        ("empty", ""),
        ("mixed alphabets", "Ws9mKynZxyUSNXYtMGAjjLO+Jg16HCa_5pJO0udNWJ4="),
        ("double padding", "Ws9mKynZxyUSNXYtMGAjjLO+Jg16HCa/5pJO0udNWJ4=="),
        ("31 bytes", Base64.encode([UInt8](repeating: 7, count: 31))),
        ("33 bytes", Base64.encode([UInt8](repeating: 7, count: 33))),
        ("whitespace", " Ws9mKynZxyUSNXYtMGAjjLO+Jg16HCa/5pJO0udNWJ4="),
        ("line break", "Ws9mKynZxyUSNXYtMGAjjLO+Jg16\nHCa/5pJO0udNWJ4="),
        ("non-canonical last bits", "Ws9mKynZxyUSNXYtMGAjjLO+Jg16HCa/5pJO0udNWJ5="),
        ("hex", String(repeating: "ab", count: 32)),
        ("percent-encoded", "Ws9mKynZxyUSNXYtMGAjjLO%2BJg16HCa%2F5pJO0udNWJ4%3D"),
    ])
    func refusedKids(name: String, kid: String) {
        #expect(PlatformSSOKeyID(normalizing: kid) == nil, "\(name)")
    }

    static let key = AppleVector.shared.encryptionKey.privateKey.publicKey

    @Test("every accepted form gives the same key", arguments: DeviceKeyForm.allCases)
    func forms(form: DeviceKeyForm) throws {
        #expect(try DeviceKeyParser.parse(form.text(for: Self.key)) == Self.key)
        if form == .jwkText {
            #expect(try DeviceKeyParser.parse(Self.key.jwk) == Self.key)
        } else {
            #expect(try DeviceKeyParser.parse(JSONValue.string(form.text(for: Self.key))) == Self.key)
        }
    }

    @Test("malformed keys are refused with a reason")
    func refusedKeys() throws {
        let spki = Self.key.pemRepresentation
        let point = Self.key.x963Representation
        let p384 = "-----BEGIN PUBLIC KEY-----\nMHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEiHhNU7mVitzQORfb30jaMMI+KAsxz49B\n"
            + "mSdt6JWjl6MC1ZZemMMihAOnk1roWV5bD+duOw8aOKGtHRXeAGtRLCtEkeED2Gfb\n"
            + "xqyaam5pygTx5toFP/GalW2zyjXg+FRi\n-----END PUBLIC KEY-----\n"
        var offCurve = point
        offCurve[64] ^= 1
        let cases: [(String, JSONValue, String)] = [
            ("a number", 5, "a key must be a PEM or base64 string or a JWK object"),
            ("garbage", "not a key", "the key is not PEM, a JWK, or base64 of a 65-byte X9.63 point"),
            ("compressed point", .string(Base64.encode([0x02] + Array(point[1..<33]))),
             "base64 key: expected a 65-byte uncompressed X9.63 point (04 || x || y), got 33 bytes"),
            ("64 bytes without 04", .string(Base64.encode(Array(point.dropFirst()))),
             "base64 key: expected a 65-byte uncompressed X9.63 point (04 || x || y), got 64 bytes"),
            ("off the curve", .string(Base64.encode(offCurve)), "base64 key: the point is not on P-256"),
            ("PEM point off the curve", .string(pem("PUBLIC KEY", offCurve)), "PEM point: the point is not on P-256"),
            ("private JWK", .object(Self.key.jwk.objectValue!.merging(["d": "AAAA"]) { $1 }),
             "invalid JWK: a private JWK was given where a public key is expected"),
            ("JWK text not JSON", "{kty: EC}", "the key looks like a JWK but is not valid JSON"),
            ("RSA JWK", ["kty": "RSA", "n": "AQAB", "e": "AQAB"], "invalid JWK: kty must be EC"),
            ("P-384 SPKI", .string(p384), "PEM is neither a P-256 SubjectPublicKeyInfo nor a 65-byte X9.63 point"),
            ("private key PEM", .string(pem("PRIVATE KEY", point)), "PEM label must be PUBLIC KEY or EC PUBLIC KEY, not PRIVATE KEY"),
            ("END label differs", .string(spki.replacingOccurrences(of: "END PUBLIC KEY", with: "END EC PUBLIC KEY")),
             "malformed PEM: the END label does not match the BEGIN label"),
            ("no END line", .string(String(spki.split(separator: "\n").dropLast().joined(separator: "\n"))),
             "malformed PEM: expected BEGIN and END lines around base64"),
            ("PEM headers", .string(spki.replacingOccurrences(of: "-----\nMFk", with: "-----\nProc-Type: 4,ENCRYPTED\nMFk")),
             "malformed PEM: the body is not base64"),
            ("PEM body not base64", "-----BEGIN PUBLIC KEY-----\nBB!O\n-----END PUBLIC KEY-----",
             "malformed PEM: the body is not base64"),
            ("SPKI with a trailing byte", .string(pem("PUBLIC KEY", Self.key.derRepresentation + [0])),
             "PEM is neither a P-256 SubjectPublicKeyInfo nor a 65-byte X9.63 point"),
        ]
        for (name, value, reason) in cases {
            #expect(throws: DeviceKeyError(reason), "\(name)") { try DeviceKeyParser.parse(value) }
        }
    }
}

/// Wraps `der` in a PEM block with `label`.
func pem(_ label: String, _ der: [UInt8]) -> String {
    let body = Base64.encode(der)
    var lines: [String] = []
    var index = body.startIndex
    while index < body.endIndex {
        let end = body.index(index, offsetBy: 64, limitedBy: body.endIndex) ?? body.endIndex
        lines.append(String(body[index..<end]))
        index = end
    }
    return "-----BEGIN \(label)-----\n" + lines.joined(separator: "\n") + "\n-----END \(label)-----\n"
}

/// The device key spellings an IdP may register.
enum DeviceKeyForm: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case spkiPEM, spkiPEMCRLF, pointPEM, pointECPEM, jwkText, base64, base64Unpadded, base64URL

    var testDescription: String { rawValue }

    func text(for key: P256.PublicKey) -> String {
        switch self {
        case .spkiPEM: key.pemRepresentation
        case .spkiPEMCRLF: key.pemRepresentation.replacingOccurrences(of: "\n", with: "\r\n")
        case .pointPEM: pem("PUBLIC KEY", key.x963Representation)
        case .pointECPEM: "\n  " + pem("EC PUBLIC KEY", key.x963Representation) + "\n"
        case .jwkText: key.jwk.serializedString()
        case .base64: Base64.encode(key.x963Representation)
        case .base64Unpadded: String(Base64.encode(key.x963Representation).prefix { $0 != "=" })
        case .base64URL: Base64.encodeURL(key.x963Representation)
        }
    }
}
