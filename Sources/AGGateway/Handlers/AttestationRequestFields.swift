import AGFormats
import Foundation

/// The JSON body of an attestation route (validate, refresh): its string fields, plus the
/// challenge and `subjectId` checks both routes share. Every failure is 400 `bad_request`.
struct AttestationRequestFields {
    /// The members as parsed: by the fast scanner when the body has its usual shape (every
    /// member a plain ASCII string, see `JSONFlatObject`), else by the strict JSON parser, which
    /// is the one that refuses. Both give the same members for a body both accept.
    private enum Members {
        case flat([(name: String, value: String)])
        case parsed([String: JSONValue])
    }

    private let members: Members

    init(body: [UInt8]) throws(GatewayError) {
        if let flat = JSONFlatObject.scan(body) {
            members = .flat(flat)
            return
        }
        guard let json = try? JSONValue(parsing: body), case .object(let fields) = json else {
            throw .badRequest("the body must be a JSON object")
        }
        members = .parsed(fields)
    }

    /// Member `name` as the strict parser would give it.
    private func member(_ name: String) -> JSONValue? {
        switch members {
        case .flat(let flat): flat.first { $0.name == name }.map { .string($0.value) }
        case .parsed(let fields): fields[name]
        }
    }

    /// A required, non-empty string field.
    func string(_ name: String) throws(GatewayError) -> String {
        guard let value = member(name) else { throw .badRequest("missing field \(name)") }
        guard case .string(let text) = value, !text.isEmpty else { throw .badRequest("\(name) must be a non-empty string") }
        return text
    }

    /// `challenge`: printable ASCII, at most 256 bytes (it becomes part of a Redis key).
    func challenge() throws(GatewayError) -> String {
        let challenge = try string("challenge")
        guard challenge.utf8.count <= 256, challenge.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .badRequest("challenge is not a challenge issued by this gateway")
        }
        return challenge
    }

    /// `subjectId` as a lower-case UUID, or nil when absent.
    func subjectID() throws(GatewayError) -> String? {
        switch member("subjectId") {
        case nil, .null?:
            return nil
        case .string(let text)?:
            guard let uuid = UUID(uuidString: text) else { throw .badRequest("subjectId must be a UUID") }
            return uuid.uuidString.lowercased()
        default:
            throw .badRequest("subjectId must be a UUID string")
        }
    }

    /// The 32 bytes of a base64 (or base64url) `keyId`, nil when it is not that.
    static func keyIDBytes(_ text: String) -> [UInt8]? {
        guard let bytes = Base64.decode(text) ?? Base64.decodeURL(text), bytes.count == 32 else { return nil }
        return bytes
    }
}

extension RequestContext {
    /// Reads an attestation route's JSON body (up to `server.max_body_bytes`) and parses it with
    /// `parse`; answers 400 `bad_request` (or the parser's own error) itself, and calls `next`
    /// only with a request that passed every check that needs no state.
    func collectAttestationRequest<Request>(_ parse: @escaping ([UInt8]) throws(GatewayError) -> Request,
                                            next: @escaping (Request) -> Void) {
        collectWholeBody(limit: snapshot.gateway.server.maxBodyBytes, refuse: { [self] in fail(.badRequest($0)) }) { [self] body in
            do throws(GatewayError) {
                next(try parse(body))
            } catch {
                fail(error)
            }
        }
    }
}
