import AGConfig
import AGPolicy
import AGAppAttest
import AGCrypto
import AGFormats
import AGHTTP
import Foundation

/// Admin calls on one tenant's devices, subjects and usage (DESIGN section 8).
enum AdminDeviceHandlers {
    /// `{keyId}` in a path: base64url, or standard base64 with `%2B`/`%2F`; returns the
    /// standard base64 form used in Redis keys.
    static func canonicalKeyID(_ text: Substring) -> String? {
        let unescaped = text.replacingOccurrences(of: "%2B", with: "+").replacingOccurrences(of: "%2F", with: "/")
            .replacingOccurrences(of: "%2b", with: "+").replacingOccurrences(of: "%2f", with: "/")
            .replacingOccurrences(of: "%3D", with: "=").replacingOccurrences(of: "%3d", with: "=")
        guard let bytes = Base64.decodeURL(unescaped) ?? Base64.decode(unescaped), bytes.count == 32 else { return nil }
        return Base64.encode(bytes)
    }

    static let keyIDInvalid = GatewayError(status: 400, code: "key_id_invalid",
                                           message: "keyId must be the base64 SHA-256 of the device's public key")

    /// `PUT …/keys/{keyId}` `{"publicKey": PEM or base64 X9.63, "counter": 0, "environment"?}`.
    static func importKey(_ context: RequestContext, tenant: Tenant, keyID: String) {
        context.request.collectBody(limit: context.snapshot.gateway.server.maxBodyBytes) { result in
            guard case .success(let body) = result else {
                context.fail(.badRequest("unreadable or too large request body"))
                return
            }
            guard case .object(let fields)? = try? JSONValue(parsing: body), case .string(let keyText)? = fields["publicKey"] else {
                context.fail(.badRequest("body must be a JSON object with publicKey"))
                return
            }
            let publicKey: P256.PublicKey
            if keyText.contains("BEGIN PUBLIC KEY"), let key = try? P256.PublicKey(pemRepresentation: keyText) {
                publicKey = key
            } else if let bytes = Base64.decode(keyText), let key = try? P256.PublicKey(x963Representation: bytes) {
                publicKey = key
            } else {
                context.fail(.badRequest("publicKey must be a P-256 public key as PEM or base64 X9.63"))
                return
            }
            guard Base64.encode(AppAttest.keyID(for: publicKey)) == keyID else {
                context.fail(keyIDInvalid)
                return
            }
            var counter: Int64 = 0
            switch fields["counter"] {
            case nil: break
            case .integer(let value)? where value >= 0 && value <= Int64(UInt32.max): counter = value
            default:
                context.fail(.badRequest("counter must be an integer from 0 to \(UInt32.max)"))
                return
            }
            var environment = tenant.config.environment.rawValue
            switch fields["environment"] {
            case nil: break
            case .string(let value)? where AppAttestEnvironment(rawValue: value) != nil: environment = value
            default:
                context.fail(.badRequest("environment must be development or production"))
                return
            }
            let now = String(Int64(Date().timeIntervalSince1970 * 1000))
            let key = DeviceStore.deviceKey(tenant, keyID)
            let pk = Base64.encode(publicKey.x963Representation)
            var event = JSONObjectWriter()
            event.add("type", "restore")
            event.add("appId", tenant.appID)
            event.add("keyId", keyID)
            context.worker.redis.evalScript(AdminScripts.importKey, keys: [key],
                                            args: [pk, String(counter), environment, now, GatewayEvents.channel, event.finished()]) { result in
                if case .failure(let error) = result { return context.storeFailed(error) }
                context.worker.shared.logger.info("device key imported", [("tenant", .string(tenant.appID)), ("keyId", .string(keyID))])
                var json = JSONObjectWriter()
                json.add("keyId", keyID)
                json.add("counter", Int(counter))
                json.add("environment", environment)
                json.add("revoked", false)
                context.respond(status: 200, json: json.finished())
            }
        }
    }

    /// `GET …/keys/{keyId}`: the device record, without anything secret.
    static func readKey(_ context: RequestContext, tenant: Tenant, keyID: String) {
        context.worker.redis.send(["HGETALL", DeviceStore.deviceKey(tenant, keyID)]) { result in
            switch result {
            case .failure(let error):
                context.storeFailed(error)
            case .success(let value):
                guard let fields = value.hashFields, let pk = fields["pk"] else {
                    context.fail(GatewayError(status: 404, code: "not_found", message: "no device with this key id"))
                    return
                }
                var json = JSONObjectWriter()
                json.add("keyId", keyID)
                json.add("publicKey", pk)
                json.add("counter", Int(fields["ctr"] ?? "0") ?? 0)
                json.add("revoked", fields["rev"] == "1")
                json.add("environment", fields["env"])
                json.add("subjectId", fields["subj"])
                if let created = fields["created"].flatMap(Double.init) {
                    json.add("createdAt", ISO8601.string(Date(timeIntervalSince1970: created / 1000)))
                }
                if let seen = fields["seen"].flatMap(Double.init) {
                    json.add("lastSeenAt", ISO8601.string(Date(timeIntervalSince1970: seen / 1000)))
                }
                context.respond(status: 200, json: json.finished())
            }
        }
    }

    /// `POST …/keys/{keyId}/revoke`.
    static func revoke(_ context: RequestContext, tenant: Tenant, keyID: String) {
        var event = JSONObjectWriter()
        event.add("type", "revoke")
        event.add("appId", tenant.appID)
        event.add("keyId", keyID)
        context.worker.redis.evalScript(AdminScripts.revoke, keys: [DeviceStore.deviceKey(tenant, keyID)],
                                        args: [GatewayEvents.channel, event.finished()]) { result in
            switch result {
            case .failure(let error):
                context.storeFailed(error)
            case .success(let value) where value.int == 0:
                context.fail(GatewayError(status: 404, code: "not_found", message: "no device with this key id"))
            case .success:
                context.worker.shared.logger.info("device revoked", [("tenant", .string(tenant.appID)), ("keyId", .string(keyID))])
                context.respond(status: 200, json: "{\"keyId\":\"\(keyID)\",\"revoked\":true}")
            }
        }
    }

    /// `PUT …/subjects/{subjectId}/subscription`: any JSON object, carried in the next tokens.
    static func setSubscription(_ context: RequestContext, tenant: Tenant, subjectID: Substring) {
        guard let uuid = UUID(uuidString: String(subjectID)) else {
            context.fail(.badRequest("subjectId must be a UUID"))
            return
        }
        context.request.collectBody(limit: context.snapshot.gateway.server.maxBodyBytes) { result in
            guard case .success(let body) = result, let value = try? JSONValue(parsing: body), case .object = value else {
                context.fail(.badRequest("the subscription must be a JSON object"))
                return
            }
            let json = value.serializedString()
            let key = DeviceStore.subjectKey(tenant, uuid.uuidString.lowercased())
            context.worker.redis.send(["SET", key, json]) { result in
                if case .failure(let error) = result { return context.storeFailed(error) }
                context.respond(status: 200, json: "{\"subjectId\":\"\(uuid.uuidString.lowercased())\",\"subscription\":\(json)}")
            }
        }
    }

    /// `GET …/usage`: monthly active devices, limit and grace state for the current month.
    static func usage(_ context: RequestContext, tenant: Tenant) {
        let month = DeviceStore.month()
        let tier = context.effectiveTier(tenant)
        let grace = context.snapshot.gateway.quotas.grace
        context.worker.redis.send(["SCARD", DeviceStore.madKey(tenant, month)]) { result in
            guard case .success(let countValue) = result else {
                if case .failure(let error) = result { context.storeFailed(error) }
                return
            }
            context.worker.redis.send(["GET", DeviceStore.graceKey(tenant, month)]) { result in
                guard case .success(let graceValue) = result else {
                    if case .failure(let error) = result { context.storeFailed(error) }
                    return
                }
                var json = JSONObjectWriter()
                json.add("month", String(month.prefix(4)) + "-" + String(month.suffix(2)))
                json.add("tier", tier.name)
                json.add("activeDevices", Int(countValue.int ?? 0))
                switch tier.madLimit {
                case .limited(let limit): json.add("limit", limit)
                case .unlimited: json.add("limit", "unlimited")
                }
                if let started = graceValue.string.flatMap(Double.init) {
                    let ends = started / 1000 + grace.seconds
                    json.add("graceStartedAt", ISO8601.string(Date(timeIntervalSince1970: started / 1000)))
                    json.add("graceEndsAt", ISO8601.string(Date(timeIntervalSince1970: ends)))
                    json.add("inGrace", Date().timeIntervalSince1970 <= ends)
                    json.add("exceeded", Date().timeIntervalSince1970 > ends)
                } else {
                    json.add("inGrace", false)
                    json.add("exceeded", false)
                }
                context.respond(status: 200, json: json.finished())
            }
        }
    }
}
