import AGFormats
import AGPlatformSSO
import Testing

@testable import AGCrypto

@Suite("Refresh tokens")
struct RefreshTokenTests {
    @Test("a token is 64 base64url characters: a 16-byte family id and a 32-byte secret; only its digest is stored")
    func shape() throws {
        let token = PlatformSSORefreshToken.newFamily()
        #expect(token.text.count == 64 && Base64.decodeURL(token.text)?.count == 48)
        #expect(Base64.decodeURL(token.familyID) == Array(Base64.decodeURL(token.text)!.prefix(16)))
        #expect(Base64.decodeURL(token.digest)?.count == 32)
        #expect(!token.description.contains(token.text))
        #expect(PlatformSSORefreshToken(presented: token.text) == token)
    }

    @Test("successors stay in the family with a new secret; new families get new ids")
    func families() {
        let token = PlatformSSORefreshToken.newFamily()
        let successor = token.successor()
        #expect(successor.familyID == token.familyID && successor.text != token.text && successor.digest != token.digest)
        #expect(PlatformSSORefreshToken.newFamily().familyID != token.familyID)
    }

    @Test("on the serving path a family and its successors draw their bytes from the worker's buffer")
    func fromTheWorkersBuffer() {
        let random = SecureRandomBuffer()
        let token = PlatformSSORefreshToken.newFamily(using: random)
        let successor = token.successor(using: random)
        #expect(random.position == 16 + 32 + 32)
        #expect(successor.familyID == token.familyID && successor.text != token.text)
        #expect(PlatformSSORefreshToken.newFamily(using: random).familyID != token.familyID)
    }

    @Test("anything but the gateway's own shape is no token", arguments: [
        "", "abc", String(repeating: "A", count: 63), String(repeating: "A", count: 65), String(repeating: "+", count: 64),
        String(repeating: "A", count: 62) + "==", String(repeating: "A", count: 63) + ".",
    ])
    func refused(_ text: String) {
        #expect(PlatformSSORefreshToken(presented: text) == nil)
    }
}
