#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Whole-file reads and owner-only atomic writes, for files that hold a private key.
enum PrivateFile {
    /// The file's bytes, or nil when it does not exist.
    static func read(_ path: String) throws(DeviceError) -> [UInt8]? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .state(path: path, reason: "cannot be read")
        }
        return [UInt8](data)
    }

    /// Replaces `path` with `bytes` atomically: a temporary file created with mode 0600 (never
    /// readable by others, not even briefly), flushed, then renamed over the target. Creates
    /// a missing parent directory with mode 0700.
    static func write(_ bytes: [UInt8], to path: String) throws(DeviceError) {
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty && !FileManager.default.fileExists(atPath: parent) {
            do {
                try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            } catch {
                throw .state(path: path, reason: "cannot create directory \(parent): \(error)")
            }
        }
        let temporary = "\(path).tmp.\(getpid())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw failure(path, "open \(temporary)", errno) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                let code = errno
                close(descriptor)
                unlink(temporary)
                throw failure(path, "write", code)
            }
            offset += written
        }
        guard fsync(descriptor) == 0 else {
            let code = errno
            close(descriptor)
            unlink(temporary)
            throw failure(path, "fsync", code)
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw failure(path, "rename", code)
        }
    }

    private static func failure(_ path: String, _ operation: String, _ code: Int32) -> DeviceError {
        .state(path: path, reason: "\(operation) failed: \(String(cString: strerror(code)))")
    }
}
