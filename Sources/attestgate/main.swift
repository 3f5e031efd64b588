#if canImport(Glibc)
import Glibc
#endif
import AGConfig
import AGDevTools
import AGGateway
import Foundation

/// attestgate's command line: argument parsing only; the work lives in AGGateway.
let usage = """
    usage:
      attestgate serve [--config conf/gateway.yaml]
      attestgate check-config [conf/ | conf/gateway.yaml]
      attestgate keygen [--algorithm ES256|RS256] --out FILE
      attestgate test-ca --out DIR
      attestgate echo-upstream [--listen 127.0.0.1:9000]

    """

func fail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(code)
}

/// The value after `--name`, or `fallback`.
func option(_ name: String, in arguments: [String], default fallback: String? = nil) -> String? {
    guard let index = arguments.firstIndex(of: name) else { return fallback }
    guard index + 1 < arguments.count else { fail("\(name) needs a value", code: 2) }
    return arguments[index + 1]
}

/// A parent may start us with signals blocked (shells, supervisors, Foundation's Process from a
/// Swift concurrency thread); SIGTERM and SIGHUP must reach the gateway whatever it inherited.
func unblockAllSignals() {
    var none = sigset_t()
    sigemptyset(&none)
    pthread_sigmask(SIG_SETMASK, &none, nil)
}

/// Blocks the gateway's signals on the calling (main) thread, once the gateway's threads exist
/// with them unblocked, so the kernel hands them to a loop thread waiting in `epoll_wait`; the
/// control loop handles them either way (libevent's handler only wakes it). Why: a signal that
/// lands on the main thread interrupts nothing there (it only waits for the gateway to stop),
/// and under ThreadSanitizer it was never handled at all: TSan defers a signal that arrives
/// inside an interceptor it does not count as blocking (`dispatch_group_wait`) until that call
/// returns, so SIGHUP and SIGTERM were lost (docs/security.md, "Fuzzing and sanitizer runs").
func leaveSignalsToTheLoopThreads() {
    var handled = sigset_t()
    sigemptyset(&handled)
    for signal in [SIGHUP, SIGTERM, SIGINT] { sigaddset(&handled, signal) }
    pthread_sigmask(SIG_BLOCK, &handled, nil)
}

/// Serves until SIGTERM/SIGINT. The gateway is released before the process exits, so what it
/// held is freed and a leak checker reports only what was really lost.
func serve(configPath: String) {
    do {
        let gateway = try Gateway(configPath: configPath)
        gateway.handleSignals()
        leaveSignalsToTheLoopThreads()
        gateway.waitUntilStopped()
    } catch {
        fail("attestgate: cannot start:\n\(error)")
    }
}

unblockAllSignals()
let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "serve":
    let path = option("--config", in: arguments, default: "conf/gateway.yaml")!
    serve(configPath: path)
    exit(0)
case "check-config":
    // One configuration per call: a second operand was ignored, and a script checking two
    // directories believed both were checked.
    guard arguments.count <= 2 else { fail("check-config takes one configuration (a directory or its gateway.yaml)\n" + usage, code: 2) }
    let path = arguments.count > 1 ? arguments[1] : "conf"
    let problems = GatewaySnapshot.check(path: path)
    if problems.isEmpty {
        print("configuration OK: \(path)")
        exit(0)
    }
    fail(problems.joined(separator: "\n"))
case "keygen":
    let algorithmName = option("--algorithm", in: arguments, default: "ES256")!
    guard let algorithm = TokenAlgorithm(rawValue: algorithmName.uppercased()) else { fail("unknown algorithm \(algorithmName)", code: 2) }
    guard let path = option("--out", in: arguments) else { fail(usage, code: 2) }
    do {
        try SigningKeyGenerator.generate(algorithm: algorithm, path: path)
        print("wrote \(algorithm.rawValue) signing key to \(path)")
    } catch {
        fail("attestgate: \(error)")
    }
case "test-ca":
    guard let directory = option("--out", in: arguments) else { fail(usage, code: 2) }
    do {
        let written = try TestCAGenerator.generate(directory: directory)
        print("wrote test App Attestation CA certificate to \(written.certificate) and its key to \(written.key)")
        print("trust it with app_attest.test_ca; never in production")
    } catch {
        fail("attestgate: \(error)")
    }
case "echo-upstream":
    let listen = option("--listen", in: arguments, default: "127.0.0.1:9000")!
    guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]) else {
        fail("--listen takes host:port", code: 2)
    }
    do {
        try EchoUpstream.serve(host: String(listen[..<colon]), port: port)
    } catch {
        fail("attestgate: \(error)")
    }
default:
    fail(usage, code: 2)
}
