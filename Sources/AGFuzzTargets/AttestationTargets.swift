import AGAppAttest
import AGCrypto
import AGFormats
import AGGateway
import Foundation

/// The attestation routes: their JSON bodies, and the App Attest verifiers behind them.
enum AttestationTargets {
    static func body(_ members: [String: String]) -> [UInt8] {
        JSONValue.object(members.mapValues { .string($0) }).serialized()
    }

    static var refreshSeed: [String: String] {
        ["keyId": FuzzFixtures.device.keyID, "assertion": Base64.encode(FuzzFixtures.assertion),
         "clientDataHash": Base64.encode(SHA256.hash(FuzzFixtures.challenge.utf8)), "challenge": FuzzFixtures.challenge]
    }

    /// A malformed refresh body is refused 400 `bad_request`, and nothing else.
    static let refreshBody = FuzzTarget(
        name: "refresh-body", summary: "the refresh route's body decoder (RefreshRequest)",
        seeds: {
            var linked = refreshSeed
            linked["subjectId"] = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
            return [body(refreshSeed), body(linked), #"{"keyId":1}"#.bytes, "[]".bytes]
        }
    ) { input in
        guard let refusal = AttestationBodyProbe.refresh(input) else { return nil }
        return refusal == (400, "bad_request") ? nil : "refresh body refused with \(refusal.status) \(refusal.code)"
    }

    static let validateCodes: Set<String> = ["bad_request", "key_id_invalid", "attestation_object_invalid", "client_data_hash_invalid"]

    /// A malformed validate body is refused 400 with one of validate's documented codes.
    static let validateBody = FuzzTarget(
        name: "validate-body", summary: "the validate route's body decoder (ValidateRequest, attestation shape)",
        seeds: {
            let members = ["keyId": FuzzFixtures.device.keyID, "attestationObject": Base64.encode(FuzzFixtures.attestation),
                           "clientDataHash": Base64.encode(SHA256.hash(FuzzFixtures.challenge.utf8)),
                           "challenge": FuzzFixtures.challenge]
            return [body(members), #"{"attestationObject":"oA=="}"#.bytes]
        }
    ) { input in
        guard let refusal = AttestationBodyProbe.validate(input) else { return nil }
        return refusal.status == 400 && validateCodes.contains(refusal.code)
            ? nil : "validate body refused with \(refusal.status) \(refusal.code)"
    }

    static let verifier = AttestationVerifier(
        trustedRoots: [FuzzFixtures.testCA.certificate], now: { Date(timeIntervalSince1970: TimeInterval(FuzzFixtures.now)) })

    /// Any bytes as an assertion and as an attestation: only objects carrying the genuine signed
    /// parts verify, and no refused assertion claims the stored key signed it (the only signed
    /// authenticator data there is carries counter 5, above the stored 4, so it is accepted).
    static let appAttest = FuzzTarget(
        name: "app-attest", summary: "AssertionVerifier and AttestationVerifier on arbitrary CBOR",
        seeds: { [FuzzFixtures.assertion, FuzzFixtures.attestation] }
    ) { input in
        let device = FuzzFixtures.device
        let hash = SHA256.hash(FuzzFixtures.challenge.utf8)
        do throws(AssertionError) {
            _ = try AssertionVerifier.verify(assertion: input, clientDataHash: hash, publicKey: device.privateKey.publicKey,
                                             appID: FuzzFixtures.appID, previousCounter: 4)
            for key in ["signature", "authenticatorData"] where member(key, of: input) != member(key, of: FuzzFixtures.assertion) {
                return "an assertion with another \(key) than the device's verified"
            }
        } catch {
            if error.isSignedByStoredKey { return "a refusal claims the stored key signed it: \(error)" }
        }
        do {
            _ = try verifier.verify(attestationObject: input, clientDataHash: hash, keyID: device.keyIDBytes,
                                    appID: FuzzFixtures.appID, environment: .development)
            if member("authData", of: input) != member("authData", of: FuzzFixtures.attestation) {
                return "an attestation with other authenticator data than the device's verified"
            }
        } catch {}
        return nil
    }

    /// The byte-string member `key` of a CBOR map (what the signatures cover).
    static func member(_ key: String, of bytes: [UInt8]) -> [UInt8]? {
        (try? CBORDecoder().decode(bytes))?[key]?.bytesValue
    }
}
