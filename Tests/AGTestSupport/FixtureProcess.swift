import Foundation

/// A Python fixture server (`Tests/Fixtures/`) that writes the port it listens on to a file.
enum FixtureProcess {
    /// Starts `script` with `arguments` (`portFile` among them), and waits (on a thread of its own,
    /// so a loaded cooperative pool cannot stretch the wait) until the port is written.
    static func start(_ script: String, _ arguments: [String], portFile: String) async throws -> (pid: pid_t, port: Int) {
        let pid = try spawnProgram("/usr/bin/env", ["python3", TestGateway.fixturePath(script)] + arguments)
        let port: Int? = await withCheckedContinuation { continuation in
            Thread {
                let deadline = ContinuousClock.now + .seconds(30)
                var status: Int32 = 0
                while ContinuousClock.now < deadline, waitpid(pid, &status, WNOHANG) == 0 {
                    if let text = try? TestFile.text(portFile), let port = Int(text) {
                        continuation.resume(returning: port)
                        return
                    }
                    usleep(10_000)
                }
                continuation.resume(returning: nil)
            }.start()
        }
        guard let port else {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw RedisServerError.couldNotStart("\(script) did not start")
        }
        return (pid, port)
    }

    /// Kills a fixture server and removes its directory (its owner's `deinit`).
    static func stop(_ pid: pid_t, removing directory: String) {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        try? FileManager.default.removeItem(atPath: directory)
    }
}
