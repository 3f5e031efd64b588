import AGAppAttest
import AGCrypto
import AGFormats
import AGJOSE
import Foundation
import AGSync
import Synchronization

/// The gateway contract the device drives, played by a few lines over `TestHTTPServer`:
/// challenges, admin key import, refresh verified with the real `AssertionVerifier`, tokens
/// signed with a real ES256 key, and a proxied `/api/` route that checks them.
///
/// Serves the public and admin routes on one port; enough to prove the device side, not a
/// model of the gateway's rules beyond what the device relies on.
final class FakeGateway: Sendable {
    static let adminToken = "test-admin-token"
    let teamID: String
    let bundleID: String
    var appID: String { "\(teamID).\(bundleID)" }

    private struct DeviceRecord {
        var publicKey: P256.PublicKey
        var counter: UInt32
        var invalidated = false
        var subjectID: String?
    }

    private struct State {
        var challenges: [String: Bool] = [:]
        var devices: [String: DeviceRecord] = [:]
        var tokenSerial = 0
    }

    private let state = Locked(State())
    private let signer: JWTSigner
    private let verifier: JWTVerifier
    /// Tokens minted from now on have already expired (to exercise re-refresh).
    let mintExpiredTokens = Atomic<Bool>(false)

    init(teamID: String = "ABCDE12345", bundleID: String = "com.example.app") throws {
        self.teamID = teamID
        self.bundleID = bundleID
        let key = JWSSigningKey.es256(try P256.PrivateKey())
        signer = JWTSigner(key: key, keyID: "test-1")
        verifier = JWTVerifier(keys: ["test-1": key.verificationKey])
    }

    /// A server answering with this gateway; stop it when done.
    func serve() throws -> TestHTTPServer {
        try TestHTTPServer { [self] request in handle(request) }
    }

    /// The stored counter of a device, nil when unknown.
    func counter(keyID: String) -> UInt32? {
        state.withLock { $0.devices[keyID]?.counter }
    }

    func subject(keyID: String) -> String? {
        state.withLock { $0.devices[keyID]?.subjectID }
    }

    // MARK: - Routes

    private func handle(_ request: TestRequest) -> TestReply {
        let path = request.path
        if request.method == "GET" && path == "/api/v1/attestation/challenge" {
            if let failure = checkTenant(request) { return failure }
            let challenge = (0..<4).map { _ in String(format: "%016llx", UInt64.random(in: .min ... .max)) }.joined()
            state.withLock { $0.challenges[challenge] = false }
            return .json("{\"challenge\":\"\(challenge)\",\"expiresAt\":\"2030-01-01T00:00:00Z\",\"ttl\":300}")
        }
        if request.method == "POST" && path == "/api/v1/attestation/refresh" {
            if let failure = checkTenant(request) { return failure }
            return refresh(request)
        }
        if request.method == "PUT" && path.hasPrefix("/admin/v1/tenants/") {
            return importKey(request)
        }
        if path.hasPrefix("/api/") {
            return proxied(request)
        }
        return error(404, "not_found", "no route")
    }

    private func error(_ status: Int, _ code: String, _ message: String) -> TestReply {
        .response(status: status, headers: [("Content-Type", "application/json"), ("X-Request-ID", "req-1")],
                  body: JSONValue.object(["error": .string(message), "code": .string(code),
                                          "requestId": "req-1"]).serialized())
    }

    private func checkTenant(_ request: TestRequest) -> TestReply? {
        guard let team = request.header("X-Team-ID"), let bundle = request.header("X-Bundle-ID") else {
            return error(400, "bad_request", "X-Team-ID and X-Bundle-ID are required")
        }
        guard team == teamID && bundle == bundleID else { return error(401, "unknown_tenant", "unknown tenant") }
        return nil
    }

    private func importKey(_ request: TestRequest) -> TestReply {
        guard request.header("Authorization") == "Bearer \(Self.adminToken)" else {
            return error(401, "unauthorized", "admin token required")
        }
        let parts = request.path.split(separator: "/")
        guard parts.count == 6, parts[3] == appID, parts[4] == "keys", let keyIDBytes = Base64.decodeURL(parts[5]),
              let body = try? JSONValue(parsing: request.body),
              let publicKeyText = body["publicKey"]?.stringValue, let x963 = Base64.decode(publicKeyText),
              let publicKey = try? P256.PublicKey(x963Representation: x963),
              let counter = body["counter"]?.integerValue, let counter = UInt32(exactly: counter) else {
            return error(400, "bad_request", "bad key import")
        }
        guard AppAttest.keyID(for: publicKey) == keyIDBytes else { return error(400, "key_id_invalid", "keyId mismatch") }
        let created = state.withLock { state in
            let keyID = Base64.encode(keyIDBytes)
            let created = state.devices[keyID] == nil
            state.devices[keyID] = DeviceRecord(publicKey: publicKey, counter: counter)
            return created
        }
        return .response(status: created ? 201 : 200, headers: [("Content-Type", "application/json")],
                         body: Array("{\"keyId\":\"\(Base64.encode(keyIDBytes))\"}".utf8))
    }

    private func refresh(_ request: TestRequest) -> TestReply {
        guard let body = try? JSONValue(parsing: request.body),
              let keyID = body["keyId"]?.stringValue,
              let assertion = body["assertion"]?.stringValue.flatMap(Base64.decode),
              let clientDataHash = body["clientDataHash"]?.stringValue.flatMap(Base64.decode),
              let challenge = body["challenge"]?.stringValue else {
            return error(400, "bad_request", "missing or invalid field")
        }
        let challengeState = state.withLock { state -> Bool? in
            guard let used = state.challenges[challenge] else { return nil }
            state.challenges[challenge] = true
            return used
        }
        guard let used = challengeState else { return error(400, "challenge_invalid", "unknown challenge") }
        guard !used else { return error(400, "challenge_already_used", "challenge already used") }
        guard clientDataHash == SHA256.hash(challenge.utf8) else {
            return error(400, "bad_request", "clientDataHash does not match the challenge")
        }
        guard let record = state.withLock({ $0.devices[keyID] }), !record.invalidated else {
            return error(404, "not_found", "no attestation for this key")
        }
        let counter: UInt32
        do {
            counter = try AssertionVerifier.verify(assertion: assertion, clientDataHash: clientDataHash,
                                                   publicKey: record.publicKey, appID: appID,
                                                   previousCounter: record.counter)
        } catch {
            state.withLock { $0.devices[keyID]?.invalidated = true }
            return self.error(409, "reattest_required", "assertion verification failed: \(error)")
        }
        let subjectID = body["subjectId"]?.stringValue
        let serial = state.withLock { state -> Int in
            state.devices[keyID]?.counter = counter
            if let subjectID { state.devices[keyID]?.subjectID = subjectID }
            state.tokenSerial += 1
            return state.tokenSerial
        }
        let now = Int64(Date().timeIntervalSince1970)
        let expiry = mintExpiredTokens.load(ordering: .sequentiallyConsistent) ? now - 10 : now + 3600
        var claims: [String: JSONValue] = [
            "iss": "attestgate-test", "aud": .string(appID), "sub": .string(keyID),
            "iat": .integer(now), "nbf": .integer(now), "exp": .integer(expiry), "jti": .string("jti-\(serial)"),
            "team_id": .string(teamID), "bundle_id": .string(bundleID),
        ]
        if let subject = subjectID ?? self.subject(keyID: keyID) { claims["subject_id"] = .string(subject) }
        guard let token = try? signer.sign(claims: claims) else { return error(500, "internal", "signing failed") }
        return .json("{\"token\":\"\(token)\",\"expiresAt\":\"2030-01-01T00:00:00Z\"}")
    }

    private func proxied(_ request: TestRequest) -> TestReply {
        guard let authorization = request.header("Authorization"), authorization.hasPrefix("Bearer ") else {
            return error(401, "token_missing", "token required")
        }
        guard let token = try? verifier.verify(String(authorization.dropFirst("Bearer ".count))) else {
            return error(401, "token_invalid", "token invalid")
        }
        guard let expiry = token.claims["exp"]?.integerValue, expiry > Int64(Date().timeIntervalSince1970) else {
            return error(401, "token_expired", "token expired")
        }
        let sub = token.claims["sub"]?.stringValue ?? "-"
        return .json("{\"hello\":\"\(sub)\",\"method\":\"\(request.method)\",\"body\":\(request.body.count)}")
    }
}
