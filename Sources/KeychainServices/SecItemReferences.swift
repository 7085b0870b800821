import Foundation
import SecureCrypto

/// A certificate: what `kSecReturnRef` returns for certificate items and `kSecValueRef` adds.
public final class SecCertificate: Sendable, Hashable {
    /// The DER encoding.
    let derData: Data

    init(derData: Data) {
        self.derData = derData
    }

    /// Whether both certificates have the same DER encoding.
    public static func == (lhs: SecCertificate, rhs: SecCertificate) -> Bool { lhs.derData == rhs.derData }

    /// Hashes the DER encoding.
    public func hash(into hasher: inout Hasher) { hasher.combine(derData) }
}

/// Wraps DER-encoded certificate bytes.
///
/// - Returns: nil when `data` is empty or does not start like a DER SEQUENCE. (Apple parses the certificate fully;
///   this implementation checks only the outer structure.)
@discardableResult
public func SecCertificateCreateWithData(_ allocator: CFAllocator?, _ data: CFData) -> SecCertificate? {
    let bytes = data as Data
    guard bytes.count > 2, bytes.first == 0x30 else { return nil }
    return SecCertificate(derData: bytes)
}

/// The DER encoding of `certificate`.
@discardableResult
public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData {
    certificate.derData as NSData
}

/// A certificate with its private key: what `kSecReturnRef` returns for identity items.
public final class SecIdentity: Sendable {
    let certificate: SecCertificate
    let privateKey: SecKey

    init(certificate: SecCertificate, privateKey: SecKey) {
        self.certificate = certificate
        self.privateKey = privateKey
    }
}

/// The certificate of `identity`.
///
/// - Returns: `errSecSuccess`, with the certificate in `certificateRef`.
@discardableResult
public func SecIdentityCopyCertificate(
    _ identity: SecIdentity, _ certificateRef: UnsafeMutablePointer<SecCertificate?>
) -> OSStatus {
    certificateRef.pointee = identity.certificate
    return errSecSuccess
}

/// The private key of `identity`.
///
/// - Returns: `errSecSuccess`, with the key in `privateKeyRef`.
@discardableResult
public func SecIdentityCopyPrivateKey(_ identity: SecIdentity, _ privateKeyRef: UnsafeMutablePointer<SecKey?>)
    -> OSStatus
{
    privateKeyRef.pointee = identity.privateKey
    return errSecSuccess
}
