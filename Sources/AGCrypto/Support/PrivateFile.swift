internal import Foundation
internal import Glibc

/// Why a private file could not be read or written: the path and the system's reason.
public struct PrivateFileError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String
    /// The file existed and `PrivateFile.write(_:to:replacing:)` was told not to replace it.
    public let alreadyExists: Bool

    public init(path: String, reason: String, alreadyExists: Bool) {
        self.path = path
        self.reason = reason
        self.alreadyExists = alreadyExists
    }

    public var description: String {
        alreadyExists ? "\(path) already exists; refusing to overwrite a key or certificate" : "cannot write \(path): \(reason)"
    }
}

/// Whole-file reads and owner-only atomic writes, for files that hold private keys (token signing
/// keys, the test CA's key, the simulated device's state).
public enum PrivateFile {
    /// The file's bytes, or nil when it does not exist.
    public static func read(_ path: String) throws(PrivateFileError) -> [UInt8]? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PrivateFileError(path: path, reason: "cannot be read", alreadyExists: false)
        }
        return [UInt8](data)
    }

    /// Writes `bytes` to `path` atomically: a temporary file created with `mode` (0600 by
    /// default: never readable by others, not even briefly), flushed, then renamed over the
    /// target. Creates a missing parent directory with mode 0700. With `replacing: false` an
    /// existing file is an error (keys are never overwritten by accident).
    public static func write(_ bytes: [UInt8], to path: String, replacing: Bool = true,
                             mode: UInt32 = 0o600) throws(PrivateFileError) {
        if !replacing && FileManager.default.fileExists(atPath: path) {
            throw PrivateFileError(path: path, reason: "exists", alreadyExists: true)
        }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty && !FileManager.default.fileExists(atPath: parent) {
            do {
                try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            } catch {
                throw PrivateFileError(path: path, reason: "cannot create directory \(parent): \(error)", alreadyExists: false)
            }
        }
        let temporary = "\(path).tmp.\(getpid())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode_t(mode))
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
        guard fchmod(descriptor, mode_t(mode)) == 0, fsync(descriptor) == 0 else {
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

    private static func failure(_ path: String, _ operation: String, _ code: Int32) -> PrivateFileError {
        PrivateFileError(path: path, reason: "\(operation) failed: \(String(cString: strerror(code)))", alreadyExists: false)
    }
}
