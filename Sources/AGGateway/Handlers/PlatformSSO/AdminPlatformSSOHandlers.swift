import AGConfig
import AGFormats
import AGHTTP
import AGJOSE
import AGPlatformSSO
import AGPolicy

/// The admin API's Platform SSO calls (DESIGN section 11), under
/// `/admin/v1/tenants/{appId}/psso/devices/{kid}`: register (`PUT`), read (`GET`), delete
/// (`DELETE`), mint a first refresh token (`POST …/refresh-tokens`, a new family) and revoke
/// (`POST …/revoke`: the device is disabled and every family of it ends).
///
/// `{kid}` is the signing key's id, base64url (standard base64 with `%2B`/`%2F`/`%3D` and
/// padding accepted too). Errors use the gateway's envelope, like every admin call.
enum AdminPlatformSSOHandlers {
    static func handle(_ context: RequestContext, tenant: Tenant, path: [Substring]) {
        guard let config = tenant.config.platformSSO else {
            return context.fail(GatewayError(status: 404, code: "not_found", message: "this tenant has no platform_sso section"))
        }
        guard path.count >= 2, path.count <= 3, path[0] == "devices" else { return context.fail(.notFound) }
        let method = context.adminMethod
        let action = path.count == 3 ? path[2] : nil
        let allowed: [String] = switch action {
        case nil: ["PUT", "GET", "DELETE"]
        case "refresh-tokens"?, "revoke"?: ["POST"]
        default: []
        }
        guard !allowed.isEmpty else { return context.fail(.notFound) }
        guard allowed.contains(method) else { return context.fail(.methodNotAllowed(allowing: allowed)) }
        guard let keyID = keyID(path[1]) else {
            return context.fail(GatewayError(status: 400, code: "key_id_invalid",
                                             message: "kid must be the base64url SHA-256 of the device's signing key (X9.63)"))
        }
        switch (method, action) {
        case ("PUT", nil): register(context, tenant: tenant, keyID: keyID)
        case ("GET", nil): read(context, tenant: tenant, keyID: keyID)
        case ("DELETE", nil): delete(context, tenant: tenant, keyID: keyID)
        case (_, "refresh-tokens"?): mint(context, tenant: tenant, config: config, keyID: keyID)
        default: revoke(context, tenant: tenant, keyID: keyID)
        }
    }

    /// The path's kid in any spelling of 32 bytes, percent-escaped `+`, `/` and `=` included.
    static func keyID(_ text: Substring) -> PlatformSSOKeyID? {
        var unescaped = ""
        var rest = text[...]
        while let first = rest.first {
            if first == "%", rest.count >= 3 {
                switch rest.dropFirst().prefix(2).uppercased() {
                case "2B": unescaped.append("+")
                case "2F": unescaped.append("/")
                case "3D": unescaped.append("=")
                default: return nil
                }
                rest = rest.dropFirst(3)
            } else {
                unescaped.append(first)
                rest = rest.dropFirst()
            }
        }
        return PlatformSSOKeyID(normalizing: unescaped)
    }

    private static func register(_ context: RequestContext, tenant: Tenant, keyID: PlatformSSOKeyID) {
        context.collectAdminBody { body in
            let registration: PlatformSSODeviceRegistration
            do throws(GatewayError) {
                registration = try PlatformSSORegistrationBody.parse(body, tenant: tenant, keyID: keyID)
            } catch {
                return context.fail(error)
            }
            context.services.platformSSO.register(registration) { result in
                switch result {
                case .failure(let failure):
                    context.storeFailed(failure)
                case .success(let created):
                    context.services.logger.info(created ? "Platform SSO device registered" : "Platform SSO device updated", [
                        ("tenant", .string(tenant.appID)), ("kid", .string(keyID.urlSafe)),
                    ])
                    let record = PlatformSSODeviceRecord(keys: registration.keys, user: registration.user, disabled: false,
                                                         createdMilliseconds: nil, updatedMilliseconds: nil)
                    context.respond(status: created ? 201 : 200, json: document(record, keyID: keyID).serializedString())
                }
            }
        }
    }

    private static func read(_ context: RequestContext, tenant: Tenant, keyID: PlatformSSOKeyID) {
        context.services.platformSSO.read(tenant: tenant, keyID: keyID) { result in
            switch result {
            case .failure(let failure): context.storeFailed(failure)
            case .success(nil): context.fail(deviceNotFound)
            case .success(let record?): context.respond(status: 200, json: document(record, keyID: keyID).serializedString())
            }
        }
    }

    private static func delete(_ context: RequestContext, tenant: Tenant, keyID: PlatformSSOKeyID) {
        context.services.platformSSO.delete(tenant: tenant, keyID: keyID) { result in
            switch result {
            case .failure(let failure): context.storeFailed(failure)
            case .success(false): context.fail(deviceNotFound)
            case .success(true):
                context.services.logger.info("Platform SSO device deleted", [("tenant", .string(tenant.appID)), ("kid", .string(keyID.urlSafe))])
                context.respond(status: 200, json: JSONValue.object(["kid": .string(keyID.urlSafe), "deleted": true]).serializedString())
            }
        }
    }

    private static func revoke(_ context: RequestContext, tenant: Tenant, keyID: PlatformSSOKeyID) {
        context.services.platformSSO.revoke(tenant: tenant, keyID: keyID) { result in
            switch result {
            case .failure(let failure): context.storeFailed(failure)
            case .success(false): context.fail(deviceNotFound)
            case .success(true):
                context.services.logger.info("Platform SSO device revoked", [("tenant", .string(tenant.appID)), ("kid", .string(keyID.urlSafe))])
                context.respond(status: 200, json: JSONValue.object(["kid": .string(keyID.urlSafe), "disabled": true]).serializedString())
            }
        }
    }

    private static func mint(_ context: RequestContext, tenant: Tenant, config: PlatformSSOConfig, keyID: PlatformSSOKeyID) {
        let token = PlatformSSORefreshToken.newFamily(using: context.services.random)
        let request = PlatformSSOMint(tenant: tenant, keyID: keyID, token: token, familyTTL: config.refreshTokenTTL,
                                      idle: config.refreshTokenIdle)
        context.services.platformSSO.mint(request) { result in
            switch result {
            case .failure(let failure):
                context.storeFailed(failure)
            case .success(.refused(.deviceUnknown)):
                context.fail(deviceNotFound)
            case .success(.refused(.deviceDisabled)):
                context.fail(GatewayError(status: 409, code: "device_disabled", message: "the device is revoked",
                                          hint: "register it again (PUT) once the user has logged in at the IdP"))
            case .success(.refused(let refusal)):
                context.storeFailed(StoreFailure(description: "unexpected mint refusal \(refusal.rawValue)"))
            case .success(.rotated(let expiresIn)):
                context.services.logger.info("Platform SSO refresh token family started", [
                    ("tenant", .string(tenant.appID)), ("kid", .string(keyID.urlSafe)), ("family", .string(token.familyID)),
                ])
                let json = JSONValue.object(["refresh_token": .string(token.text), "expires_in": .integer(expiresIn)])
                context.respond(status: 201, json: json.serializedString())
            }
        }
    }

    private static let deviceNotFound = GatewayError(status: 404, code: "not_found", message: "no Platform SSO device with this kid")

    /// A device as the admin API shows it (public keys only: nothing in it is secret).
    private static func document(_ record: PlatformSSODeviceRecord, keyID: PlatformSSOKeyID) -> JSONValue {
        var members: [String: JSONValue] = [
            "kid": .string(keyID.urlSafe),
            "signingKey": record.keys.signingKey.jwk,
            "encryptionKey": record.keys.encryptionKey.jwk,
            "encryptionKeyId": .string(PlatformSSOKeyID(of: record.keys.encryptionKey).canonical),
            "user": ["sub": .string(record.user.subject), "claims": .object(record.user.claims)],
            "disabled": .bool(record.disabled),
        ]
        if let created = record.createdMilliseconds { members["createdAt"] = .string(UTCDateTime(unixMilliseconds: created).iso8601()) }
        if let updated = record.updatedMilliseconds { members["updatedAt"] = .string(UTCDateTime(unixMilliseconds: updated).iso8601()) }
        return .object(members)
    }
}
