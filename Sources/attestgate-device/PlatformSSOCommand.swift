import AGDevice
import AGFormats
import Foundation

/// `attestgate-device psso register|refresh|demo`: a simulated Mac against the gateway's
/// Platform SSO endpoints (DESIGN section 11).
enum PlatformSSOCommand {
    static func run(_ options: Options) throws {
        switch options.path {
        case "register":
            let session = try openSession(options, needsAdmin: true)
            let (status, expiresIn) = try session.register(claims: claims(for: session.mac))
            print("registered (admin \(status)); first refresh token minted, expires in \(expiresIn) s")
        case "refresh":
            // stdout is the claims alone: the Mac's line goes to stderr.
            let session = try openSession(options, needsAdmin: false, announce: printError)
            let refresh = try rejectionExplained { try session.refresh() }
            printError("refreshed: new refresh token, expires in \(refresh.response.refreshTokenExpiresIn) s")
            print(refresh.response.idTokenClaims.prettyPrinted())
        case "demo":
            try demo(options)
        case "load":
            let session = try configuration(options, needsAdmin: true)
            let generator = PlatformSSOLoadGenerator(
                configuration: macConfiguration(options, session: session), teamID: options.string("--team", default: "ABCDE12345"),
                bundleID: options.string("--bundle", default: "com.example.app"),
                devices: try options.positiveInteger("--devices", default: 100),
                concurrency: try options.positiveInteger("--concurrency", default: 8),
                threads: options.values["--threads"] == nil ? nil : try options.positiveInteger("--threads", default: 1),
                duration: try options.seconds("--seconds", default: 10))
            print(try generator.run(progress: printError))
        case "crypto":
            let rate = try PlatformSSOCryptoCeiling.measure(duration: try options.seconds("--seconds", default: 3))
            print("crypto rounds/s \(String(format: "%.1f", rate)) (ES256 verify + P-256 keygen + ECDH + KDF + AES-GCM + ES256 sign, per CPU-second of one thread)")
        case nil:
            throw UsageError(message: "psso needs register, refresh, demo, load or crypto")
        case let other?:
            throw UsageError(message: "unknown psso command \(other)")
        }
    }

    private static func demo(_ options: Options) throws {
        let session = try openSession(options, needsAdmin: true)
        let (status, expiresIn) = try session.register(claims: claims(for: session.mac))
        print("login     device registered (admin \(status)), first refresh token minted (expires in \(expiresIn) s)")
        let loginToken = session.mac.refreshToken
        let first = try rejectionExplained { try session.refresh() }
        let request = first.request
        print("nonce     server nonce fetched (client-request-id \(first.clientRequestID))")
        print("request   POST \(session.configuration.prefix)/token, JWS header and claims (secrets elided):")
        let shownClaims = request.claims.map { name, value in
            name == "refresh_token" || name == session.configuration.nonceClaimName ? (name, JSONValue.string(redacted(value))) : (name, value)
        }
        print(indented(JSONValue.prettyPrintedObject(request.header, keySeparator: " : ")))
        print(indented(JSONValue.prettyPrintedObject(shownClaims, keySeparator: " : ")))
        let header = first.response.header
        print("response  JWE \(header["alg"]?.stringValue ?? "?") + \(header["enc"]?.stringValue ?? "?"), typ "
            + "\(header["typ"]?.stringValue ?? "?"), kid \(header["kid"]?.stringValue ?? "?"); decrypted and checked")
        print("id_token  header \(first.response.idTokenHeader.serializedString())")
        print(indented(first.response.idTokenClaims.prettyPrinted()))
        print("          expires_in \(first.response.expiresIn) s, refresh_token_expires_in \(first.response.refreshTokenExpiresIn) s")
        _ = try rejectionExplained { try session.refresh() }
        print("refresh   again: the refresh token rotated once more")
        guard let loginToken else { return }
        let replay = Result { () throws(DeviceError) in try session.refresh(presenting: loginToken) }
        switch replay {
        case .failure(.rejected(let rejection)):
            print("replay    the login's refresh token once more → \(rejection.status) \(rejection.code): \(rejection.message)")
        case .failure(let error):
            throw error
        case .success:
            print("replay    the login's refresh token was accepted again: reuse detection failed")
            exit(1)
        }
    }

    /// The session for the Mac in `--state`, created with new keys when there is none.
    private static func openSession(_ options: Options, needsAdmin: Bool,
                                    announce: (String) -> Void = { print($0) }) throws -> MacSession {
        let statePath = options.string("--state", default: ".run/mac.json")
        let mac: SimulatedMac
        if let saved = try SimulatedMac.load(from: statePath) {
            mac = saved
            announce("mac       \(mac.appID) kid \(mac.keyID.urlSafe) user \(mac.subject) (keys from \(statePath))")
        } else {
            guard needsAdmin else { throw UsageError(message: "no Mac in \(statePath); run psso register first") }
            mac = try SimulatedMac(teamID: options.string("--team", default: "ABCDE12345"),
                                   bundleID: options.string("--bundle", default: "com.example.app"),
                                   subject: options.string("--user", default: "user@example.com"))
            try mac.save(to: statePath)
            announce("mac       \(mac.appID) kid \(mac.keyID.urlSafe) user \(mac.subject) (new keys, saved to \(statePath))")
        }
        return MacSession(configuration: macConfiguration(options, session: try configuration(options, needsAdmin: needsAdmin)),
                          mac: mac, statePath: statePath)
    }

    /// What the Mac's Platform SSO extension is configured with (`--prefix`, `--client-id`,
    /// `--audience`, `--issuer`).
    private static func macConfiguration(_ options: Options, session: DeviceSessionConfiguration) -> MacConfiguration {
        let prefix = options.string("--prefix", default: "/psso")
        return MacConfiguration(
            session: session, prefix: prefix, clientID: options.string("--client-id", default: "com.example.app.psso"),
            audience: options.values["--audience"] ?? "\(session.gateway)\(prefix)/token",
            issuer: options.string("--issuer", default: "https://attestgate.example.com"))
    }

    /// The user claims the demo IdP registers with the device.
    private static func claims(for mac: SimulatedMac) -> [String: JSONValue] {
        ["name": "Example User", "email": .string(mac.subject.contains("@") ? mac.subject : "\(mac.subject)@example.com"),
         "groups": ["staff"]]
    }

    /// Runs `body`; a 401 (the Mac would ask the user to log in) gets a hint.
    private static func rejectionExplained<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DeviceError {
            if case .rejected(let rejection) = error, rejection.status == 401 {
                printError("\(rejection)\nthe gateway wants a new login: run attestgate-device psso register")
                exit(1)
            }
            throw error
        }
    }

    private static func redacted(_ value: JSONValue) -> String {
        "\((value.stringValue ?? "").prefix(6))…"
    }

    private static func indented(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { "          " + $0 }.joined(separator: "\n")
    }
}
