import AGFormats

/// Runtime changes shared between gateway instances: the Redis Stream `ag:{cfg}:events`.
///
/// Every instance reads it with `XREAD` from the last id it saw, so a reconnect resumes where
/// it stopped instead of losing what was published meanwhile (Pub/Sub's weakness). The
/// `{cfg}` hash tag puts it in one cluster slot with the tier hashes, so a tier change and its
/// event are written by one script. Each entry has one field, `e`, holding the event JSON;
/// the stream is trimmed to about `maximumLength` entries.
public enum GatewayEvents {
    public static let stream = "ag:{cfg}:events"
    public static let field = "e"
    public static let maximumLength = 10_000

    /// `XADD` of one event, for a command outside a script.
    public static func append(_ json: String) -> [String] {
        ["XADD", stream, "MAXLEN", "~", String(maximumLength), "*", field, json]
    }

    /// Lua appending `ARGV[<eventArgument>]` to `KEYS[<streamKey>]`, for scripts that write
    /// the change and its event at once.
    public static func luaAppend(streamKey: Int, eventArgument: Int) -> String {
        "redis.call('XADD', KEYS[\(streamKey)], 'MAXLEN', '~', '\(maximumLength)', '*', '\(field)', ARGV[\(eventArgument)])\n"
    }

    /// `{"type": "revoke" | "restore", "appId", "keyId"}`: a device was revoked, or its key
    /// imported again.
    public static func device(_ type: String, appID: String, keyID: String) -> String {
        JSONValue.object(["type": .string(type), "appId": .string(appID), "keyId": .string(keyID)]).serializedString()
    }
}
