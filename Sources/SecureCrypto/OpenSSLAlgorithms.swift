internal import COpenSSL
import Foundation

/// Algorithm implementations fetched once from OpenSSL's default provider.
///
/// OpenSSL 3 looks an algorithm up in its provider store on every implicit use (`EVP_sha256()` in an `*_init` call);
/// fetching once and reusing the handle removes that cost from every operation.
enum OpenSSLAlgorithms {
    // These handles are immutable, reference-counted OpenSSL objects that OpenSSL documents as safe to share
    // between threads once fetched; they live for the whole process.
    nonisolated(unsafe) static let sha256: OpaquePointer = fetchDigest("SHA256")
    nonisolated(unsafe) static let sha1: OpaquePointer = fetchDigest("SHA1")
    nonisolated(unsafe) static let sha224: OpaquePointer = fetchDigest("SHA224")
    nonisolated(unsafe) static let sha384: OpaquePointer = fetchDigest("SHA384")
    nonisolated(unsafe) static let sha512: OpaquePointer = fetchDigest("SHA512")
    nonisolated(unsafe) static let hmac: OpaquePointer = {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else { fatalError("OpenSSL has no HMAC") }
        return mac
    }()
    nonisolated(unsafe) static let hkdf: OpaquePointer = fetchKDF("HKDF")
    nonisolated(unsafe) static let scrypt: OpaquePointer = fetchKDF("SCRYPT")
    nonisolated(unsafe) static let pbkdf2: OpaquePointer = fetchKDF("PBKDF2")

    nonisolated(unsafe) static let aes128GCM: OpaquePointer = fetchCipher("AES-128-GCM")
    nonisolated(unsafe) static let aes128CBC: OpaquePointer = fetchCipher("AES-128-CBC")
    nonisolated(unsafe) static let aes192GCM: OpaquePointer = fetchCipher("AES-192-GCM")
    nonisolated(unsafe) static let aes256GCM: OpaquePointer = fetchCipher("AES-256-GCM")
    nonisolated(unsafe) static let aes256CBC: OpaquePointer = fetchCipher("AES-256-CBC")

    private static func fetchDigest(_ name: String) -> OpaquePointer {
        guard let md = EVP_MD_fetch(nil, name, nil) else { fatalError("OpenSSL has no \(name)") }
        return md
    }

    private static func fetchKDF(_ name: String) -> OpaquePointer {
        guard let kdf = EVP_KDF_fetch(nil, name, nil) else { fatalError("OpenSSL has no \(name)") }
        return kdf
    }

    private static func fetchCipher(_ name: String) -> OpaquePointer {
        guard let cipher = EVP_CIPHER_fetch(nil, name, nil) else { fatalError("OpenSSL has no \(name)") }
        return cipher
    }
}

/// OSSL_PARAM key names. `OSSL_PARAM_construct_*` keep the key pointer, so the names must outlive every parameter
/// array: they are allocated once and never freed.
enum ParameterName {
    nonisolated(unsafe) static let group = strdup("group")!
    nonisolated(unsafe) static let publicKey = strdup("pub")!
    nonisolated(unsafe) static let privateKey = strdup("priv")!
    nonisolated(unsafe) static let digest = strdup("digest")!
    nonisolated(unsafe) static let key = strdup("key")!
    nonisolated(unsafe) static let salt = strdup("salt")!
    nonisolated(unsafe) static let info = strdup("info")!
    nonisolated(unsafe) static let password = strdup("pass")!
    nonisolated(unsafe) static let scryptN = strdup("n")!
    nonisolated(unsafe) static let scryptR = strdup("r")!
    nonisolated(unsafe) static let scryptP = strdup("p")!
    nonisolated(unsafe) static let scryptMaxMemory = strdup("maxmem_bytes")!
    nonisolated(unsafe) static let iterations = strdup("iter")!
    nonisolated(unsafe) static let sha256Name = strdup("SHA256")!
    nonisolated(unsafe) static let p256Name = strdup("P-256")!
}

extension Data {
    /// Calls `body` with a pointer that is never nil, even for empty data (OpenSSL rejects a nil buffer).
    func withNonNilBytes<Result>(_ body: (UnsafePointer<UInt8>, Int) throws -> Result) rethrows -> Result {
        if isEmpty {
            var zero: UInt8 = 0
            return try body(&zero, 0)
        }
        return try withUnsafeBytes { try body($0.bindMemory(to: UInt8.self).baseAddress!, $0.count) }
    }
}

extension UnsafeRawBufferPointer {
    /// The base address as `UnsafePointer<UInt8>`, never nil (OpenSSL rejects a nil buffer even for zero bytes).
    var nonNilBytes: UnsafePointer<UInt8> {
        if let base = baseAddress { return base.assumingMemoryBound(to: UInt8.self) }
        return emptyByte
    }
}

// A one-byte buffer whose address stands in for the bytes of an empty buffer; never written.
nonisolated(unsafe) private let emptyByte: UnsafePointer<UInt8> = {
    let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
    pointer.initialize(to: 0)
    return UnsafePointer(pointer)
}()
