import Foundation

/// Runs a program to completion; returns its exit status and standard output (with standard
/// error merged in when `mergingErrors`, dropped otherwise).
///
/// posix_spawn + waitpid, output through a temporary file: Foundation's `Process` was seen to
/// never reap its child when several tests spawned programs at once on the 2-thread
/// cooperative pool, and a daemon started by the child (redis-server) must not keep a pipe
/// open. The child gets an empty signal mask (test threads block signals, and daemons it
/// starts must honour SIGTERM).
public func runProgram(_ path: String, _ arguments: [String], mergingErrors: Bool = false) throws -> (status: Int32, output: Data) {
    let outputPath = NSTemporaryDirectory() + "agrun-" + UUID().uuidString
    defer { unlink(outputPath) }
    let pid = try spawnProgram(path, arguments, outputPath: outputPath, mergingErrors: mergingErrors)
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1, errno == EINTR {}
    let output = Data((try? TestFile.bytes(outputPath)) ?? [])
    // WIFEXITED/WEXITSTATUS are macros: exit code in bits 8-15, signal in the low 7 bits.
    let exitStatus = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return (exitStatus, output)
}

/// Starts a program (stdin from /dev/null, stdout to `outputPath` or /dev/null) with an empty
/// signal mask and default handlers; the caller reaps it with `waitpid`.
public func spawnProgram(_ path: String, _ arguments: [String], outputPath: String? = nil,
                         mergingErrors: Bool = false) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outputPath ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    if mergingErrors {
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
    } else {
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    }
    // Nothing else of the test process's: an in-process gateway's accepted sockets are not
    // close-on-exec, and a child holding one (a daemonized redis-server lives on) keeps the
    // connection open after the gateway closed it, so a test waiting for the close waits out
    // its timeout.
    _ = addCloseFrom(&actions, 3)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var noSignals = sigset_t()
    sigemptyset(&noSignals)
    posix_spawnattr_setsigmask(&attributes, &noSignals)
    var defaultSignals = sigset_t()
    sigfillset(&defaultSignals)
    posix_spawnattr_setsigdefault(&attributes, &defaultSignals)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
    guard spawned == 0 else {
        throw RedisServerError.couldNotStart("cannot run \(path): \(String(cString: strerror(spawned)))")
    }
    return pid
}

/// Runs `redis-cli` against a URL: an independent look at what the gateway stored.
public enum RedisCLI {
    @discardableResult
    public static func run(_ url: String, _ arguments: String...) throws -> String {
        try run(url, arguments)
    }

    public static func run(_ url: String, _ arguments: [String]) throws -> String {
        let output = try runProgram("/usr/bin/redis-cli", ["-u", url, "--no-auth-warning"] + arguments).output
        return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
/// module does not declare.
private let addCloseFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
        fatalError("glibc 2.34 or later needed: posix_spawn_file_actions_addclosefrom_np not found")
    }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
}()
