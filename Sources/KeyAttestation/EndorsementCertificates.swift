internal import COpenSSL
import Foundation

/// X.509 for endorsement-key certificates, through OpenSSL: parsing (PEM or DER), chain verification to the
/// trusted roots, and the certified RSA key's modulus.
final class CertificateStore: @unchecked Sendable {
    // Immutable after init; OpenSSL's X509 objects are reference-counted and safe to read from several threads.
    private let roots: [OpaquePointer]
    private let intermediates: [OpaquePointer]

    /// - Throws: `TPMAttestationError` when a certificate does not parse.
    init(roots: [Data], intermediates: [Data]) throws {
        self.roots = try roots.flatMap(Self.certificates)
        self.intermediates = try intermediates.flatMap(Self.certificates)
    }

    deinit {
        for certificate in roots + intermediates { X509_free(certificate) }
    }

    /// Verifies that `der` chains to one of the roots (through the intermediates) and returns the modulus of its
    /// RSA public key.
    ///
    /// - Throws: `TPMAttestationError` saying why OpenSSL refused the chain, or that the key is not RSA.
    func verifiedRSAModulus(of der: Data) throws -> Data {
        guard let certificate = Self.parseDER(der) else {
            throw TPMAttestationError("the endorsement certificate is not a DER X.509 certificate")
        }
        defer { X509_free(certificate) }
        guard let store = X509_STORE_new(), let context = X509_STORE_CTX_new(), let chain = OPENSSL_sk_new_null()
        else { throw TPMAttestationError("OpenSSL could not set up a certificate check") }
        defer {
            X509_STORE_CTX_free(context)
            X509_STORE_free(store)
            OPENSSL_sk_free(chain)
        }
        for root in roots { X509_STORE_add_cert(store, root) }
        for intermediate in intermediates { OPENSSL_sk_push(chain, UnsafeRawPointer(intermediate)) }
        guard X509_STORE_CTX_init(context, store, certificate, chain) == 1 else {
            throw TPMAttestationError("OpenSSL could not set up a certificate check")
        }
        guard X509_verify_cert(context) == 1 else {
            let reason = String(cString: X509_verify_cert_error_string(Int(X509_STORE_CTX_get_error(context))))
            ERR_clear_error()
            throw TPMAttestationError("the endorsement certificate does not chain to a trusted CA: \(reason)")
        }
        guard let key = X509_get0_pubkey(certificate), EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA else {
            throw TPMAttestationError("the endorsement certificate does not hold an RSA key")
        }
        var modulus: OpaquePointer?
        var exponent: OpaquePointer?
        defer {
            BN_free(modulus)
            BN_free(exponent)
        }
        guard EVP_PKEY_get_bn_param(key, "n", &modulus) == 1, EVP_PKEY_get_bn_param(key, "e", &exponent) == 1,
            let modulus, let exponent, BN_get_word(exponent) == 65537
        else { throw TPMAttestationError("the endorsement certificate's RSA key is not one a TPM makes") }
        var bytes = [UInt8](repeating: 0, count: Int((BN_num_bits(modulus) + 7) / 8))
        BN_bn2bin(modulus, &bytes)
        return Data(bytes)
    }

    /// The certificates in `data`: one DER certificate, or any number of PEM ones.
    private static func certificates(_ data: Data) throws -> [OpaquePointer] {
        if let der = parseDER(data) { return [der] }
        var found: [OpaquePointer] = []
        data.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return }
            defer { BIO_free(bio) }
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) { found.append(certificate) }
        }
        ERR_clear_error()
        guard !found.isEmpty else { throw TPMAttestationError("a trusted certificate is neither DER nor PEM") }
        return found
    }

    private static func parseDER(_ data: Data) -> OpaquePointer? {
        data.withUnsafeBytes { raw -> OpaquePointer? in
            guard let start = raw.bindMemory(to: UInt8.self).baseAddress else { return nil }
            var pointer: UnsafePointer<UInt8>? = start
            guard let certificate = d2i_X509(nil, &pointer, raw.count) else {
                ERR_clear_error()
                return nil
            }
            guard let end = pointer, end - start == raw.count else {
                X509_free(certificate)
                return nil
            }
            return certificate
        }
    }
}
