import AGCrypto
import AGHTTP
import AGDevTools
import AGDevice
import AGFormats
#if canImport(Glibc)
import Glibc
#endif
import Foundation

let usage = """
    usage: attestgate-device <command> [options]

    Plays an iOS App Attest device against an attestgate gateway.

    commands:
      register             create a device key (or reuse the one in --state) and import it
                           through the admin API with its current counter
      attest               create a device key (or reuse the one in --state) and register it
                           by App Attest attestation (POST /api/v1/attestation/validate),
                           certified by a test CA the gateway trusts (app_attest.test_ca);
                           prints the token on stdout
      refresh              challenge + assertion; prints the token on stdout
      call PATH            refresh, then call PATH through the gateway with the token;
                           prints the status on stderr and the body on stdout
      demo                 register when --state has no device, refresh, show the token's
                           header and claims, then GET /api/hello through the gateway
      load                 register --devices new keys, then run challenge + refresh on
                           --concurrency connections for --seconds and print a summary
      psso register        play a Mac's Platform SSO login: make a signing and an encryption
                           key (or reuse the ones in --state), register them through the admin
                           API with --user, mint a first refresh token
      psso refresh         server nonce + refresh request as a Mac sends it; decrypts and checks
                           the answer, keeps the new refresh token, prints the id_token's claims
      psso demo            login (register + first refresh token), two refreshes, then replay
                           the first token: the gateway revokes its family
      psso load            register --devices Macs, then run nonce + refresh on --concurrency
                           connections for --seconds and print a summary
      psso crypto          the gateway's public-key work per refresh in a loop for --seconds on
                           one thread (the benchmark's crypto ceiling)

    options:
      --gateway URL            public listener (default http://127.0.0.1:8080)
      --admin URL              admin listener (default http://127.0.0.1:9901)
      --admin-token-file FILE  file holding the admin bearer token (default .run/admin-token)
      --admin-token TOKEN      the admin bearer token itself
      --team ID                Apple team ID (default ABCDE12345, or the saved device's)
      --bundle ID              bundle ID (default com.example.app, or the saved device's)
      --state FILE             device state: key, counter, keyId (default .run/device.json)
      --subject UUID           link the device to this subject when refreshing
      --test-ca FILE           attest: test CA certificate (default conf/test-ca.pem)
      --test-ca-key FILE       attest: test CA private key (default conf/test-ca-key.pem)
      --environment ENV        attest: development (default) or production AAGUID
      --timeout SECONDS        limit for each HTTP request (default 10)
      --method METHOD          call: request method (default GET)
      --data JSON              call: request body, sent as application/json
      --devices N              load: simulated devices (default 100)
      --concurrency C          load: keep-alive connections, one cycle in flight each (default 8)
      --threads T              load: threads sharing them, each waiting on its connections at
                               once (default: one thread per connection)
      --seconds S              load: duration (default 10)
      --prefix PATH            psso: the tenant's platform_sso.path_prefix (default /psso)
      --client-id ID           psso: platform_sso.client_id (default com.example.app.psso)
      --audience URL           psso: the token URL the Mac is configured with (default
                               <gateway>/<prefix>/token)
      --issuer URL             psso: the id_token iss the Mac accepts (default
                               https://attestgate.example.com, tokens.issuer of conf/)
      --user SUB               psso: the user the device is registered to (default
                               user@example.com)

    The state files hold private keys and the Mac's refresh token (mode 0600, psso default
    --state .run/mac.json); they are never printed.
    """

struct UsageError: Error {
    let message: String
}

/// Command-line options, parsed without interpreting them.
struct Options {
    var command = ""
    var path: String?
    var values: [String: String] = [:]

    static let valueOptions: Set<String> = [
        "--gateway", "--admin", "--admin-token-file", "--admin-token", "--team", "--bundle", "--state",
        "--subject", "--test-ca", "--test-ca-key", "--environment", "--timeout", "--method", "--data", "--devices", "--concurrency", "--threads", "--seconds",
        "--prefix", "--client-id", "--audience", "--issuer", "--user",
    ]

    init(_ arguments: [String]) throws(UsageError) {
        var remaining = arguments[...]
        guard let command = remaining.popFirst() else { throw UsageError(message: "missing command") }
        self.command = command
        while let argument = remaining.popFirst() {
            if argument.hasPrefix("--") {
                var name = argument
                var value: String?
                if let equals = argument.firstIndex(of: "=") {
                    name = String(argument[..<equals])
                    value = String(argument[argument.index(after: equals)...])
                }
                guard Self.valueOptions.contains(name) else { throw UsageError(message: "unknown option \(name)") }
                guard let given = value ?? remaining.popFirst() else { throw UsageError(message: "\(name) needs a value") }
                values[name] = given
            } else if (command == "call" || command == "psso") && path == nil {
                path = argument
            } else {
                throw UsageError(message: "unexpected argument \(argument)")
            }
        }
    }

    func string(_ name: String, default fallback: String) -> String { values[name] ?? fallback }

    func positiveInteger(_ name: String, default fallback: Int) throws(UsageError) -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(text), value > 0 else { throw UsageError(message: "\(name) must be a positive integer") }
        return value
    }

    func seconds(_ name: String, default fallback: Double) throws(UsageError) -> Duration {
        let text = values[name]
        guard let value = text.map({ Double($0) }) ?? fallback, value > 0, value.isFinite else {
            throw UsageError(message: "\(name) must be a positive number of seconds")
        }
        return .milliseconds(Int64(value * 1000))
    }
}

func adminToken(_ options: Options) throws(DeviceError) -> String {
    if let token = options.values["--admin-token"] { return token }
    let path = options.string("--admin-token-file", default: ".run/admin-token")
    guard let data = FileManager.default.contents(atPath: path) else {
        throw .configuration("cannot read the admin token file \(path) (give --admin-token-file or --admin-token)")
    }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

func configuration(_ options: Options, needsAdmin: Bool) throws -> DeviceSessionConfiguration {
    DeviceSessionConfiguration(
        gateway: try HTTPEndpoint(url: options.string("--gateway", default: "http://127.0.0.1:8080")),
        admin: try HTTPEndpoint(url: options.string("--admin", default: "http://127.0.0.1:9901")),
        adminToken: needsAdmin ? try adminToken(options) : options.values["--admin-token"],
        timeout: try options.seconds("--timeout", default: 10))
}

/// The session for the device in `--state`; `register` says whether the admin token will be
/// needed (the device is new or to be registered again).
func openSession(_ options: Options, creating: Bool, register: Bool = false) throws
    -> (session: DeviceSession, origin: DeviceSession.Origin) {
    let statePath = options.string("--state", default: ".run/device.json")
    let needsAdmin = register || (creating && !FileManager.default.fileExists(atPath: statePath))
    return try DeviceSession.open(configuration: configuration(options, needsAdmin: needsAdmin), statePath: statePath,
                                  teamID: options.values["--team"], bundleID: options.values["--bundle"],
                                  defaultTeamID: "ABCDE12345", defaultBundleID: "com.example.app",
                                  creatingIfMissing: creating)
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

func describe(_ session: DeviceSession, _ origin: DeviceSession.Origin) -> String {
    let device = session.device
    let source = switch origin {
    case .stateFile: "key from \(session.statePath ?? "state")"
    case .registered(let registration): "new key registered (admin \(registration.status)), saved to \(session.statePath ?? "-")"
    }
    return "device    \(device.appID) keyId \(device.keyID) counter \(device.counter) (\(source))"
}

/// Attests the device in `--state` (a new one when there is none) with the test CA.
func attest(_ options: Options) throws {
    let certificatePath = options.string("--test-ca", default: "conf/test-ca.pem")
    let keyPath = options.string("--test-ca-key", default: "conf/test-ca-key.pem")
    guard let certificatePEM = try? String(contentsOfFile: certificatePath, encoding: .utf8),
          let keyPEM = try? String(contentsOfFile: keyPath, encoding: .utf8) else {
        throw UsageError(message: "cannot read \(certificatePath) and \(keyPath) (create them with `attestgate test-ca --out conf`)")
    }
    let testCA = try TestCertificateAuthority(certificatePEM: certificatePEM, privateKeyPEM: keyPEM)
    let environmentName = options.string("--environment", default: "development")
    guard let environment = SimulatedAttestationEnvironment(rawValue: environmentName) else {
        throw UsageError(message: "--environment is development or production")
    }
    let statePath = options.string("--state", default: ".run/device.json")
    let device = try SimulatedDevice.load(from: statePath)
        ?? SimulatedDevice(teamID: options.values["--team"] ?? "ABCDE12345", bundleID: options.values["--bundle"] ?? "com.example.app")
    let session = DeviceSession(configuration: try configuration(options, needsAdmin: false), device: device, statePath: statePath)
    let token = try session.attest(testCA: testCA, environment: environment, subjectID: options.values["--subject"])
    printError("device    \(device.appID) keyId \(device.keyID) attested (\(environment.rawValue)), saved to \(statePath)")
    if let expiresAt = token.expiresAt { printError("expires at \(expiresAt)") }
    print(token.token)
}

func run(_ options: Options) throws {
    switch options.command {
    case "register":
        let (session, origin) = try openSession(options, creating: true, register: true)
        if case .stateFile = origin {
            let registration = try session.register()
            print("device    \(registration.appID) keyId \(registration.keyID) counter \(registration.counter) "
                + "(key from \(session.statePath ?? "-") registered again, admin \(registration.status))")
        } else {
            print(describe(session, origin))
        }
    case "attest":
        try attest(options)
    case "refresh":
        let (session, _) = try openSession(options, creating: false)
        let token = try session.refresh(subjectID: options.values["--subject"])
        if let expiresAt = token.expiresAt { printError("expires at \(expiresAt)") }
        print(token.token)
    case "call":
        guard let path = options.path else { throw UsageError(message: "call needs a PATH") }
        let (session, _) = try openSession(options, creating: false)
        if let subject = options.values["--subject"] { try session.refresh(subjectID: subject) }
        let response = try session.call(path: path, method: options.string("--method", default: "GET"),
                                        body: options.values["--data"].map { Array($0.utf8) })
        printError("HTTP \(response.status)")
        print(response.text)
    case "demo":
        let (session, origin) = try openSession(options, creating: true)
        print(describe(session, origin))
        let challenge = try session.challenge()
        print("challenge \(challenge.value)" + (challenge.ttl.map { " (ttl \($0)s)" } ?? ""))
        let token = try session.refresh(with: challenge, subjectID: options.values["--subject"])
        print("token     \(token.redacted)" + (token.expiresAt.map { " expires \($0)" } ?? ""))
        let (header, claims) = try token.decoded()
        print("header\n\(header.prettyPrinted())\nclaims\n\(claims.prettyPrinted())")
        let hello = Result { () throws(DeviceError) in try session.call(path: "/api/hello") }
        switch hello {
        case .success(let response):
            print("GET /api/hello → \(response.status)\n\(response.text)")
        case .failure(.rejected(let rejection)):
            print("\(rejection)")
            exit(1)
        case .failure(let error):
            throw error
        }
    case "load":
        let generator = LoadGenerator(configuration: try configuration(options, needsAdmin: true),
                                      teamID: options.string("--team", default: "ABCDE12345"),
                                      bundleID: options.string("--bundle", default: "com.example.app"),
                                      devices: try options.positiveInteger("--devices", default: 100),
                                      concurrency: try options.positiveInteger("--concurrency", default: 8),
                                      threads: options.values["--threads"] == nil
                                          ? nil : try options.positiveInteger("--threads", default: 1),
                                      duration: try options.seconds("--seconds", default: 10))
        let report = try generator.run(progress: printError)
        print(report)
    case "psso":
        try PlatformSSOCommand.run(options)
    case "help", "-h", "--help":
        print(usage)
    default:
        throw UsageError(message: "unknown command \(options.command)")
    }
}

do {
    try run(Options(Array(CommandLine.arguments.dropFirst())))
} catch let error as UsageError {
    printError("attestgate-device: \(error.message)\n\n\(usage)")
    exit(2)
} catch {
    printError("attestgate-device: \(error)")
    exit(1)
}
