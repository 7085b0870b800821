import Foundation
import KeychainServices
import SecureCrypto

/// A persisted collection as the registry keeps it.
struct CollectionEntry: Equatable {
    /// Its name in object paths (`/org/freedesktop/secrets/collection/<name>`).
    var name: String
    var label: String
    /// Seconds since 1970.
    var created: UInt64
    var modified: UInt64
}

/// The persisted collections and the aliases, kept in the keychain beside the items: each collection made with
/// `CreateCollection` is an entry (a generic password of service `org.freedesktop.Secret/.collections`, account the
/// collection's name, label its label), each alias one of service `org.freedesktop.Secret/.aliases` (account the
/// alias, its attributes naming the collection). Entries hold no secret and trust every program, and are readable
/// from the first unlock since boot on (`kSecAttrAccessibleAfterFirstUnlock`), so a locked keychain still shows its
/// collections, locked. `login` is always there, labelled "Login" unless its label was set; `default` names it
/// unless set otherwise.
extension KeychainSecrets {
    /// The registry's own pseudo-collections: names no object path can hold (a `.`), so no client's collection
    /// takes them.
    static let collectionRegistry = ".collections"
    static let aliasRegistry = ".aliases"

    /// Every persisted collection, `login` first, then in the order they were made. A registry that cannot be read
    /// (the keychain was not unlocked since boot) leaves `login` alone.
    func collections() -> [CollectionEntry] {
        let entries = (try? items(Self.collectionRegistry)) ?? []
        var login = CollectionEntry(name: SecretServiceProvider.persisted, label: "Login", created: 0, modified: 0)
        var others: [CollectionEntry] = []
        for entry in entries {
            let collection = CollectionEntry(
                name: entry.id, label: entry.label, created: entry.created, modified: entry.modified)
            if entry.id == login.name {
                login = collection
            } else if entry.id != SecretServiceProvider.inMemory {
                others.append(collection)
            }
        }
        return [login] + others.sorted { ($0.created, $0.name) < ($1.created, $1.name) }
    }

    /// The aliases set, by alias: the collection each names. `default` names `login` unless set otherwise.
    func aliases() -> [String: String] {
        var aliases = [SecretServiceProvider.defaultAlias: SecretServiceProvider.persisted]
        for entry in (try? items(Self.aliasRegistry)) ?? [] {
            if let collection = entry.attributes["collection"] { aliases[entry.id] = collection }
        }
        return aliases
    }

    /// Makes a persisted collection labelled `label`; its name, made from the label (letters, digits and `_`,
    /// lower case), numbered when another collection has it.
    func createCollection(label: String) throws -> String {
        let taken = Set(collections().map(\.name) + [SecretServiceProvider.inMemory])
        var base = String(
            String.UnicodeScalarView(
                label.lowercased().unicodeScalars.prefix(64).map {
                    ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) ? $0 : "_"
                }))
        if base.isEmpty { base = "collection" }
        var name = base
        var number = 2
        while taken.contains(name) {
            name = "\(base)_\(number)"
            number += 1
        }
        _ = try add(
            Self.collectionRegistry, label: label, attributes: [:], contentType: "", secret: SecureBytes(Data()),
            trust: .everyProgram, id: name, accessible: kSecAttrAccessibleAfterFirstUnlock)
        return name
    }

    /// Sets collection `name`'s label (the `login` collection's too).
    func setLabel(ofCollection name: String, to label: String) throws {
        if try item(Self.collectionRegistry, name) == nil {
            _ = try add(
                Self.collectionRegistry, label: label, attributes: [:], contentType: "", secret: SecureBytes(Data()),
                trust: .everyProgram, id: name, accessible: kSecAttrAccessibleAfterFirstUnlock)
        } else {
            try update(Self.collectionRegistry, name, label: label)
        }
    }

    /// Points `alias` at collection `name`; nil removes it (`default` then names `login` again).
    func setAlias(_ alias: String, to name: String?) throws {
        try delete(Self.aliasRegistry, alias)
        guard let name else { return }
        _ = try add(
            Self.aliasRegistry, label: alias, attributes: ["collection": name], contentType: "",
            secret: SecureBytes(Data()), trust: .everyProgram, id: alias, accessible: kSecAttrAccessibleAfterFirstUnlock
        )
    }

    /// Deletes collection `name` (not `login`): its items, then the aliases naming it, then its entry. An item the
    /// keychain refuses to delete stops it there, the collection left with what remains.
    func deleteCollection(_ name: String) throws {
        for item in try items(name, fresh: true) { try delete(name, item.id) }
        for (alias, collection) in aliases() where collection == name {
            try setAlias(alias, to: nil)
        }
        try delete(Self.collectionRegistry, name)
    }
}
