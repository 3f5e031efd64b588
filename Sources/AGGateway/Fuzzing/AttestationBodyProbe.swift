/// The attestation routes' body decoders, for the fuzz targets (`AGFuzzTargets`): they are the
/// first code a public request body reaches, and internal to the gateway.
package enum AttestationBodyProbe {
    /// Decodes a refresh body: nil when accepted, else the refusal's status and code.
    package static func refresh(_ body: [UInt8]) -> (status: Int, code: String)? {
        do throws(GatewayError) {
            _ = try RefreshRequest(body: body)
            return nil
        } catch {
            return (error.status, error.code)
        }
    }

    /// Decodes a validate body: nil when accepted, else the refusal's status and code.
    package static func validate(_ body: [UInt8]) -> (status: Int, code: String)? {
        do throws(GatewayError) {
            _ = try ValidateRequest(body: body)
            return nil
        } catch {
            return (error.status, error.code)
        }
    }
}
