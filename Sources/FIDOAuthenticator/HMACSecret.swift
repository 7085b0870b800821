import FIDOProtocol
import Foundation
import SecureCrypto

/// A GetAssertion's `hmac-secret` input (CTAP 2.1 §12.5), checked before the user is asked: the secret shared with
/// the platform and the one or two 32-byte salts it sent encrypted.
struct HMACSecretRequest: Sendable {
    static let name = "hmac-secret"

    let method: PINUVAuthProtocol
    let sharedSecret: SecureBytes
    let salts: SecureBytes

    /// The extension's output for a credential whose CredRandom values are `secret` (64 bytes: the one used with
    /// user verification, then the one without): HMAC-SHA-256 of each salt under the CredRandom that `verified`
    /// picks, encrypted for the platform.
    func output(secret: SecureBytes, verified: Bool) throws -> [UInt8] {
        guard secret.count == 64 else { throw CTAP2.Status.other }
        let credRandom = verified ? secret.slice(0..<32) : secret.slice(32..<64)
        var outputs = SecureBytes(zeros: 0)
        for start in stride(from: 0, to: salts.count, by: 32) {
            let code = salts.slice(start..<start + 32).withUnsafeBytes {
                HMACSHA256.authenticationCode(for: $0, using: credRandom)
            }
            outputs = outputs.appending(SecureBytes(code))
        }
        return try method.encrypt(outputs, key: sharedSecret)
    }
}

extension FIDOAuthenticator {
    /// The `hmac-secret` input of a GetAssertion's `extensions`, checked; nil when it asks for none.
    ///
    /// - Throws: `missingParameter` for an input without its key agreement, salts or their code;
    ///   `invalidParameter` for an unknown protocol or a key that is not on P-256; `pinAuthInvalid` when the code
    ///   does not match; `invalidLength` for salts that are not 32 or 64 bytes.
    func hmacSecretRequest(_ extensions: CBOR?) throws -> HMACSecretRequest? {
        guard let input = extensions?[HMACSecretRequest.name] else { return nil }
        guard let agreement = input[1], let saltEnc = input[2]?.bytesValue, let saltAuth = input[3]?.bytesValue else {
            throw CTAP2.Status.missingParameter
        }
        guard let method = PINUVAuthProtocol(rawValue: UInt64(max(input[4]?.intValue ?? 1, 0))) else {
            throw CTAP2.Status.invalidParameter
        }
        let secret = try sharedSecret(agreement, method)
        guard method.verify(saltEnc, signature: saltAuth, key: secret) else { throw CTAP2.Status.pinAuthInvalid }
        let salts = try method.decrypt(saltEnc, key: secret)
        guard salts.count == 32 || salts.count == 64 else { throw CTAP2.Status.invalidLength }
        return HMACSecretRequest(method: method, sharedSecret: secret, salts: salts)
    }
}
