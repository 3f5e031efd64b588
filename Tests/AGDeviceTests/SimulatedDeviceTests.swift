import AGAppAttest
import AGCrypto
import AGDevice
import AGFormats
import AGTestSupport
import Foundation
import Testing

private let team = "ABCDE12345"
private let bundle = "com.example.app"
private let appID = "ABCDE12345.com.example.app"

@Test("assertions verify with AssertionVerifier and carry a growing counter")
func assertionsVerify() throws {
    var device = try SimulatedDevice(teamID: team, bundleID: bundle)
    #expect(device.appID == appID)
    #expect(device.counter == 0)
    var stored: UInt32 = 0
    for expected in UInt32(1)...3 {
        let (assertion, clientDataHash) = try device.makeAssertion(challenge: "challenge-\(expected)")
        #expect(clientDataHash == SHA256.hash("challenge-\(expected)".utf8))
        #expect(device.counter == expected)
        stored = try AssertionVerifier.verify(assertion: assertion, clientDataHash: clientDataHash,
                                              publicKey: device.privateKey.publicKey, appID: appID,
                                              previousCounter: stored)
        #expect(stored == expected)
    }
}

@Test("the assertion is shaped like a real device's: text keys signature then authenticatorData, flags 0x40")
func assertionShape() throws {
    var device = try SimulatedDevice(teamID: team, bundleID: bundle)
    let assertion = try device.makeAssertion(clientDataHash: [UInt8](repeating: 9, count: 32))
    let decoded = try CBORDecoder(requireShortestArguments: true).decode(assertion)
    guard case .map(let entries) = decoded else {
        Issue.record("not a map")
        return
    }
    #expect(entries.map(\.key) == [.text("signature"), .text("authenticatorData")])
    let authenticatorData = try #require(decoded["authenticatorData"]?.bytesValue)
    #expect(authenticatorData.count == 37)
    #expect(Array(authenticatorData[0..<32]) == SHA256.hash(appID.utf8))
    #expect(authenticatorData[32] == 0x40)
    #expect(Array(authenticatorData[33..<37]) == [0, 0, 0, 1])
    let signature = try #require(decoded["signature"]?.bytesValue)
    #expect(signature.first == 0x30)
}

@Test("keyId is base64 of SHA-256 of the X9.63 key, as AppAttest.keyID computes it")
func keyIdentifiers() throws {
    let device = try SimulatedDevice(teamID: team, bundleID: bundle)
    let expected = AppAttest.keyID(for: device.privateKey.publicKey)
    #expect(device.keyIDBytes == expected)
    #expect(device.keyID == Base64.encode(expected))
    #expect(device.keyIDForPath == Base64.encodeURL(expected))
    #expect(!device.keyIDForPath.contains("="))
    #expect(device.publicKeyX963.count == 65 && device.publicKeyX963.first == 0x04)
}

@Test("the verifier rejects stale counters, other App IDs, other keys, other client data and flipped bits")
func verifierRejections() throws {
    var device = try SimulatedDevice(teamID: team, bundleID: bundle)
    let other = try SimulatedDevice(teamID: team, bundleID: bundle)
    let (first, firstHash) = try device.makeAssertion(challenge: "one")
    let (second, secondHash) = try device.makeAssertion(challenge: "two")
    let key = device.privateKey.publicKey

    // Replaying the first assertion after the second was accepted.
    _ = try AssertionVerifier.verify(assertion: second, clientDataHash: secondHash, publicKey: key, appID: appID,
                                     previousCounter: 0)
    #expect(throws: AssertionError.counterNotIncreased(stored: 2, received: 1)) {
        try AssertionVerifier.verify(assertion: first, clientDataHash: firstHash, publicKey: key, appID: appID,
                                     previousCounter: 2)
    }
    #expect(throws: AssertionError.counterNotIncreased(stored: 2, received: 2)) {
        try AssertionVerifier.verify(assertion: second, clientDataHash: secondHash, publicKey: key, appID: appID,
                                     previousCounter: 2)
    }
    #expect(throws: AssertionError.rpIDHashMismatch) {
        try AssertionVerifier.verify(assertion: first, clientDataHash: firstHash, publicKey: key,
                                     appID: "ABCDE12345.com.example.other", previousCounter: 0)
    }
    #expect(throws: AssertionError.signatureInvalid) {
        try AssertionVerifier.verify(assertion: first, clientDataHash: firstHash, publicKey: other.privateKey.publicKey,
                                     appID: appID, previousCounter: 0)
    }
    #expect(throws: AssertionError.signatureInvalid) {
        try AssertionVerifier.verify(assertion: first, clientDataHash: secondHash, publicKey: key, appID: appID,
                                     previousCounter: 0)
    }
    // Flip a bit in the counter (the last byte of the encoding): the signature no longer covers it.
    var flipped = first
    flipped[flipped.count - 1] ^= 0x01
    #expect(throws: AssertionError.signatureInvalid) {
        try AssertionVerifier.verify(assertion: flipped, clientDataHash: firstHash, publicKey: key, appID: appID,
                                     previousCounter: 0)
    }
}

@Test("an exhausted counter refuses to sign rather than wrap around")
func counterExhausted() throws {
    var device = SimulatedDevice(teamID: team, bundleID: bundle, privateKey: try P256.PrivateKey(),
                                 counter: UInt32.max - 1)
    _ = try device.makeAssertion(challenge: "last")
    #expect(device.counter == UInt32.max)
    #expect(throws: DeviceError.self) { try device.makeAssertion(challenge: "one too many") }
    #expect(device.counter == UInt32.max)
}

// MARK: - State file

private func temporaryPath(_ name: String) -> String {
    NSTemporaryDirectory() + "agdevice-\(UUID().uuidString)/\(name)"
}

@Test("state round-trips through a file, owner-only, and the counter continues across loads")
func stateFileRoundTrip() throws {
    let path = temporaryPath("device.json")
    defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
    #expect(try SimulatedDevice.load(from: path) == nil)

    var device = try SimulatedDevice(teamID: team, bundleID: bundle)
    _ = try device.makeAssertion(challenge: "a")
    _ = try device.makeAssertion(challenge: "b")
    try device.save(to: path)

    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    let text = try TestFile.text(path)
    let document = try JSONValue(parsing: text)
    #expect(document["keyId"]?.stringValue == device.keyID)
    #expect(document["teamId"]?.stringValue == team)
    #expect(document["bundleId"]?.stringValue == bundle)
    #expect(document["counter"]?.integerValue == 2)
    #expect(document["privateKey"]?.stringValue?.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)

    var loaded = try #require(try SimulatedDevice.load(from: path))
    #expect(loaded.keyID == device.keyID)
    #expect(loaded.counter == 2)
    let (assertion, hash) = try loaded.makeAssertion(challenge: "c")
    #expect(try AssertionVerifier.verify(assertion: assertion, clientDataHash: hash,
                                         publicKey: device.privateKey.publicKey, appID: appID,
                                         previousCounter: 2) == 3)
    // Saving again replaces the file atomically and leaves no temporary behind.
    try loaded.save(to: path)
    #expect(try SimulatedDevice.load(from: path)?.counter == 3)
    let directory = (path as NSString).deletingLastPathComponent
    #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["device.json"])
}

@Test("corrupt or mismatched state documents are refused with the file named")
func stateRejections() throws {
    let device = try SimulatedDevice(teamID: team, bundleID: bundle)
    let valid = try device.stateDocument()
    guard case .object(let members) = valid else { return }
    func replacing(_ key: String, _ value: JSONValue?) -> JSONValue {
        var changed = members
        changed[key] = value
        return .object(changed)
    }
    let other = try SimulatedDevice(teamID: team, bundleID: bundle)
    let cases: [JSONValue] = [
        replacing("version", 2),
        replacing("counter", -1),
        replacing("counter", .integer(Int64(UInt32.max) + 1)),
        replacing("counter", "3"),
        replacing("privateKey", "not a key"),
        replacing("privateKey", nil),
        replacing("teamId", ""),
        replacing("keyId", .string(other.keyID)),
    ]
    for document in cases {
        #expect(throws: DeviceError.self, "\(document)") {
            try SimulatedDevice(stateDocument: document, source: "state.json")
        }
    }
    #expect(try SimulatedDevice(stateDocument: valid, source: "state.json").keyID == device.keyID)

    let path = temporaryPath("broken.json")
    defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
    try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                            withIntermediateDirectories: true)
    try Data("{not json".utf8).write(to: URL(fileURLWithPath: path))
    do {
        _ = try SimulatedDevice.load(from: path)
        Issue.record("loaded a broken file")
    } catch {
        guard case .state(let reportedPath, _) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(reportedPath == path)
    }
}
