import AGCrypto
import AGFormats
import AGJOSE
import AGPlatformSSO
import Glibc

/// The public-key work a gateway does for one Platform SSO refresh, in a loop on one thread:
/// one ES256 verify (the request), one ephemeral P-256 key, one ECDH and Concat KDF, one
/// AES-256-GCM seal, one ES256 sign (the id_token). Through the same wrappers the gateway uses,
/// so refreshes per gateway CPU-second over this rate is what everything else costs.
public enum PlatformSSOCryptoCeiling {
    /// Rounds per CPU-second of this thread over at least `duration` of its CPU time (a per-core
    /// figure, like `openssl speed`, that other work on the machine does not lower).
    public static func measure(duration: Duration) throws(DeviceError) -> Double {
        do {
            let device = try P256.PrivateKey(), encryption = try P256.PrivateKey(), gateway = try P256.PrivateKey()
            let request = Array(String(repeating: "r", count: 900).utf8)
            let signature = try device.rawSignature(for: request)
            let deviceKey = JWSVerificationKey.es256(device.publicKey)
            let idToken = Array(String(repeating: "i", count: 400).utf8)
            let plaintext = [UInt8](repeating: 0x41, count: 900)
            let limit = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
            let start = threadCPUSeconds()
            var rounds = 0
            while threadCPUSeconds() - start < limit || rounds == 0 {
                guard deviceKey.isValidSignature(signature, for: request) else { throw CryptoError(operation: "ES256 verify", code: 0, reason: "the signature did not verify") }
                let ephemeral = try P256.PrivateKey()
                let secret = try ephemeral.sharedSecretFromKeyAgreement(with: encryption.publicKey)
                let key = ConcatKDF.deriveKey(sharedSecret: secret, algorithmID: "A256GCM",
                                              partyUInfo: ApplePartyInfo.partyUInfo(ephemeralKey: ephemeral.publicKey),
                                              partyVInfo: [], keyBitLength: 256)
                _ = try AES256GCM.seal(plaintext, key: key, iv: [UInt8](repeating: 1, count: 12), authenticating: [])
                _ = try gateway.rawSignature(for: idToken)
                rounds += 1
            }
            return Double(rounds) / (threadCPUSeconds() - start)
        } catch let error as CryptoError {
            throw .crypto(error)
        } catch {
            throw .unexpectedResponse(status: 0, reason: "\(error)")
        }
    }

    /// CPU time this thread has used, in seconds.
    private static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
