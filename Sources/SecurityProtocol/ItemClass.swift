/// A keychain item class, named by its `kSecClass` string value.
package enum ItemClass: String, CaseIterable, Sendable {
    case genericPassword = "genp"
    case internetPassword = "inet"
    case certificate = "cert"
    case key = "keys"
    /// A certificate together with the private key whose application label equals the certificate's public-key
    /// hash; a view over two stored items, never stored itself.
    case identity = "idnt"

    /// The classes that are rows in the store.
    package static let storedClasses: [ItemClass] = [.genericPassword, .internetPassword, .certificate, .key]
}

/// Its `kSecClass` string (`genp`, `inet`, `cert`, `keys`, `idnt`), UTF-8.
extension ItemClass: ProtocolCodable {}
