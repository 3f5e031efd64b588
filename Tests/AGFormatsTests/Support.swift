import Foundation

/// Bytes from a hex string; spaces are ignored (test data only).
func hex(_ string: String) -> [UInt8] {
    let digits = Array(string.utf8.filter { $0 != UInt8(ascii: " ") })
    return stride(from: 0, to: digits.count, by: 2).map {
        UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
    }
}

/// The real-device vectors copied into `Tests/Fixtures/`.
enum Fixtures {
    static var directory: URL {
        // Tests/AGFormatsTests/Support.swift → Tests/Fixtures
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures")
    }

    /// The base64 attestation objects and assertions of the vectors file.
    static func vectors() throws -> [String] {
        let data = try Data(contentsOf: directory.appendingPathComponent("app-attest-real-devices.json"))
        let root = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        let attestations = (root["attestations"] as! [[String: Any]]).compactMap { $0["attestationObject"] as? String }
        let assertions = (root["assertions"] as! [[String: Any]]).compactMap { $0["assertion"] as? String }
        return attestations + assertions
    }
}
