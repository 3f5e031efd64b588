internal import COpenSSL
internal import CShims

/// An OpenSSL memory BIO, used to move PEM text in and out of the library.
final class MemoryBIO {
    let pointer: OpaquePointer
    /// Keeps the bytes a read-only BIO points into alive for the BIO's lifetime.
    private let backing: [UInt8]?

    /// A read-only BIO over a copy of `text`'s UTF-8 bytes.
    init(reading text: String, operation: String) throws(CryptoError) {
        let bytes = Array(text.utf8)
        guard bytes.count <= Int(Int32.max) else {
            throw .invalidInput(operation, "input too large")
        }
        backing = bytes
        let made = withCBytes(bytes) { base, count in BIO_new_mem_buf(base, Int32(count)) }
        guard let made else { throw .openSSL(operation) }
        pointer = made
    }

    /// An empty, writable BIO.
    init(writingFor operation: String) throws(CryptoError) {
        backing = nil
        guard let made = BIO_new(BIO_s_mem()) else { throw .openSSL(operation) }
        pointer = made
    }

    deinit { BIO_free(pointer) }

    /// Everything written so far, as text.
    func contents() -> String {
        var data: UnsafeMutablePointer<CChar>?
        let length = ag_bio_get_mem_data(pointer, &data)
        guard let data, length > 0 else { return "" }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }
}
