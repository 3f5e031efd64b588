import AGFormats

/// Runtime changes announced between gateway instances on `ag:events`.
public enum GatewayEvents {
    public static let channel = "ag:events"

    /// `{"type": "revoke" | "restore", "appId", "keyId"}`: a device was revoked, or its key
    /// imported again.
    public static func device(_ type: String, appID: String, keyID: String) -> String {
        JSONValue.object(["type": .string(type), "appId": .string(appID), "keyId": .string(keyID)]).serializedString()
    }
}
