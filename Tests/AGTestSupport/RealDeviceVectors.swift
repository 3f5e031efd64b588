import Foundation

/// The real-device App Attest assertions of `Tests/Fixtures/app-attest-real-devices.json`.
public struct RealAssertionVector: Sendable {
    public let teamID: String
    public let bundleID: String
    public let keyID: String
    public let publicKeyPEM: String
    /// The challenge string whose SHA-256 is the assertion's clientDataHash.
    public let challenge: String
    public let assertion: String
    public let counter: Int
    public let previousCounter: Int

    public var appID: String { teamID + "." + bundleID }

    public static func load() throws -> [RealAssertionVector] {
        let data = try Data(contentsOf: URL(fileURLWithPath: TestGateway.fixturePath("app-attest-real-devices.json")))
        let root = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        return (root["assertions"] as! [[String: Any]]).map { entry in
            let clientData = Data(base64Encoded: entry["clientData"] as! String)!
            return RealAssertionVector(
                teamID: entry["teamId"] as! String, bundleID: entry["bundleId"] as! String,
                keyID: entry["keyId"] as! String, publicKeyPEM: entry["publicKeyPem"] as! String,
                challenge: String(decoding: clientData, as: UTF8.self), assertion: entry["assertion"] as! String,
                counter: entry["counter"] as! Int, previousCounter: entry["previousCounter"] as! Int)
        }
    }
}

/// Runs `Tests/Fixtures/verify_jwt.py`: verifies a token with Python's `cryptography`, returns
/// `{"header", "claims"}` or nil when the signature does not verify.
public func independentlyVerifiedJWT(jwks: String, token: String) throws -> [String: Any]? {
    let (status, output) = try runProgram("/usr/bin/env", ["python3", TestGateway.fixturePath("verify_jwt.py"), jwks, token])
    guard status == 0 else { return nil }
    return try JSONSerialization.jsonObject(with: output) as? [String: Any]
}
