internal import COpenSSL
internal import COpenSSLShims
import Foundation
import SecureCrypto

/// `TPM2_MakeCredential` done outside the TPM, as a verifier does it (TPM 2.0 Part 1, "Credential Protection"):
/// a random seed encrypted to the endorsement key; from the seed, an AES key that encrypts the credential and an
/// HMAC key that binds it to the attestation key's name. The TPM opens it (`TPM2_ActivateCredential`) only with
/// that endorsement key and an object of that name loaded.
enum CredentialProtection {
    /// Protects `credential` (at most 32 bytes) for the object named `name`, under an RSA-2048 endorsement key
    /// with the L-1 template (SHA-256 names, AES-128-CFB).
    static func makeCredential(
        _ credential: Data, name: Data, endorsementModulus: Data
    ) throws -> TPMAttestationChallenge {
        let seed = try SecureRandom.bytes(32)
        let encryptedSecret = try rsaOAEP(seed, label: Data("IDENTITY\0".utf8), modulus: endorsementModulus)
        let symmetricKey = kdfa(seed, label: "STORAGE", context: name, bits: 128)
        var identity = Data([UInt8(credential.count >> 8), UInt8(credential.count & 0xFF)]) + credential
        identity = try aes128CFB(identity, key: symmetricKey)
        let integrityKey = kdfa(seed, label: "INTEGRITY", context: Data(), bits: 256)
        let integrity = HMACSHA256.authenticationCode(for: identity + name, using: SecureBytes(integrityKey))
        return TPMAttestationChallenge(
            credentialBlob: Data([0x00, UInt8(integrity.count)]) + integrity + identity,
            encryptedSecret: encryptedSecret)
    }

    /// KDFa with HMAC-SHA256 (SP 800-108 counter mode): `HMAC(key, i || label || 0 || context || bits)` for
    /// i = 1, 2, … until `bits` are made.
    static func kdfa(_ key: Data, label: String, context: Data, bits: Int) -> Data {
        let hmacKey = SecureBytes(key)
        var out = Data()
        var counter: UInt32 = 1
        while out.count * 8 < bits {
            var message = withUnsafeBytes(of: counter.bigEndian) { Data($0) }
            message += Data(label.utf8) + [0] + context
            message += withUnsafeBytes(of: UInt32(bits).bigEndian) { Data($0) }
            out += HMACSHA256.authenticationCode(for: message, using: hmacKey)
            counter += 1
        }
        return out.prefix(bits / 8)
    }

    /// AES-128 in CFB mode with a zero IV, as the TPM encrypts a credential.
    static func aes128CFB(_ plaintext: Data, key: Data) throws -> Data {
        guard let context = EVP_CIPHER_CTX_new() else { throw TPMAttestationError("OpenSSL could not make a cipher") }
        defer { EVP_CIPHER_CTX_free(context) }
        let iv = [UInt8](repeating: 0, count: 16)
        var out = [UInt8](repeating: 0, count: plaintext.count)
        var tail = [UInt8](repeating: 0, count: 16)
        var written: Int32 = 0
        var finished: Int32 = 0
        let ok = key.withUnsafeBytes { keyBytes in
            plaintext.withUnsafeBytes { input in
                EVP_EncryptInit_ex(
                    context, EVP_aes_128_cfb128(), nil, keyBytes.bindMemory(to: UInt8.self).baseAddress, iv) == 1
                    && EVP_EncryptUpdate(
                        context, &out, &written, input.bindMemory(to: UInt8.self).baseAddress, Int32(input.count)) == 1
                    && EVP_EncryptFinal_ex(context, &tail, &finished) == 1
            }
        }
        // CFB is a stream mode: everything comes out of the update, nothing is held back for the final call.
        guard ok, written == Int32(plaintext.count), finished == 0 else {
            throw TPMAttestationError("OpenSSL could not encrypt the credential")
        }
        return Data(out)
    }

    /// RSA-OAEP with SHA-256 (and MGF1-SHA-256) under the public key `modulus`, exponent 65537.
    static func rsaOAEP(_ plaintext: Data, label: Data, modulus: Data) throws -> Data {
        guard let key = rsaPublicKey(modulus: modulus) else {
            throw TPMAttestationError("the endorsement key is not an RSA public key OpenSSL accepts")
        }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
            throw TPMAttestationError("OpenSSL could not use the endorsement key")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_encrypt_init(context) == 1,
            EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_OAEP_PADDING) == 1,
            EVP_PKEY_CTX_set_rsa_oaep_md_name(context, "SHA256", nil) == 1,
            EVP_PKEY_CTX_set_rsa_mgf1_md_name(context, "SHA256", nil) == 1
        else { throw TPMAttestationError("OpenSSL could not set up RSA-OAEP") }
        // OpenSSL takes ownership of the label: it must come from OpenSSL's allocator.
        let copy = label.withUnsafeBytes { CRYPTO_memdup($0.baseAddress, $0.count, #fileID, #line) }
        guard let copy, EVP_PKEY_CTX_set0_rsa_oaep_label(context, copy, Int32(label.count)) == 1 else {
            la_openssl_free(copy)
            throw TPMAttestationError("OpenSSL could not set the OAEP label")
        }
        var length = 0
        var out = [UInt8](repeating: 0, count: modulus.count)
        length = out.count
        let ok = plaintext.withUnsafeBytes {
            EVP_PKEY_encrypt(context, &out, &length, $0.bindMemory(to: UInt8.self).baseAddress, $0.count) == 1
        }
        guard ok else { throw TPMAttestationError("OpenSSL could not encrypt to the endorsement key") }
        return Data(out.prefix(length))
    }

    /// EVP_PKEY_PUBLIC_KEY: OSSL_KEYMGMT_SELECT_ALL_PARAMETERS | OSSL_KEYMGMT_SELECT_PUBLIC_KEY (the composite
    /// macro does not import into Swift).
    private static let selectPublicKey = Int32(OSSL_KEYMGMT_SELECT_ALL_PARAMETERS | OSSL_KEYMGMT_SELECT_PUBLIC_KEY)

    // OSSL_PARAM_BLD keeps the key-name pointers until it builds the array: names that outlive every builder.
    nonisolated(unsafe) private static let modulusName = strdup("n")!
    nonisolated(unsafe) private static let exponentName = strdup("e")!

    /// An RSA public key from its modulus, exponent 65537.
    static func rsaPublicKey(modulus: Data) -> OpaquePointer? {
        guard let builder = OSSL_PARAM_BLD_new() else { return nil }
        defer { OSSL_PARAM_BLD_free(builder) }
        let n = modulus.withUnsafeBytes { BN_bin2bn($0.bindMemory(to: UInt8.self).baseAddress, Int32($0.count), nil) }
        let e = BN_new()
        defer {
            BN_free(n)
            BN_free(e)
        }
        guard let n, let e, BN_set_word(e, 65537) == 1,
            OSSL_PARAM_BLD_push_BN(builder, modulusName, n) == 1, OSSL_PARAM_BLD_push_BN(builder, exponentName, e) == 1,
            let parameters = OSSL_PARAM_BLD_to_param(builder)
        else { return nil }
        defer { OSSL_PARAM_free(parameters) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1,
            EVP_PKEY_fromdata(context, &key, selectPublicKey, parameters) == 1
        else { return nil }
        return key
    }
}
