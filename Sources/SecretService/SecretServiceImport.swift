import CGio
import CSecretBus
import Foundation
import SecureCrypto
import SecurityProtocol

/// `lactl secret-service import`: copies every item of the Secret Service provider running on the bus
/// (gnome-keyring, KWallet's ksecretd, KeePassXC) into the keychain's login collection, as this provider keeps them.
/// Each copy remembers where it came from (its comment: the provider's executable and the item's object path), so a
/// second run adds only what the first did not; nothing is changed or removed on either side. Secrets travel in a
/// `plain` session: the bus is local, and the copy is made by the user's own program.
package enum SecretServiceImport {
    package struct Outcome: Sendable {
        /// The provider's executable (or its connection's name when the bus cannot say).
        package var source: String
        package var imported = 0
        /// Items a run before already copied.
        package var alreadyThere = 0
        /// The locked collections left alone (their labels) and how many items they hold, when known.
        package var locked: [(label: String, items: Int?)] = []
        /// Items that could not be read, with why.
        package var unreadable: [String] = []
    }

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    static let destination = "org.freedesktop.secrets"

    /// Copies the items of the provider on the bus at `address` (nil: the session bus) into the current keychain
    /// client's store (call it inside that client's scope). `trustingNoProgram`: every program's first use of an
    /// imported secret asks the user (the items get an empty trusted-application list); otherwise every program of
    /// the user uses them, as under the provider they come from.
    ///
    /// - Throws: ``Failure`` when no other provider runs, the bus is unreachable, or the keychain refuses an item.
    package static func run(address: String?, trustingNoProgram: Bool) throws -> Outcome {
        var error: UnsafeMutablePointer<CChar>?
        guard let bus = la_secret_bus_open(address, &error) else {
            defer { g_free(error) }
            throw Failure(description: error.map { String(cString: $0) } ?? "cannot connect to the session bus")
        }
        defer { la_secret_bus_close(bus) }
        let pid = Int32(bitPattern: la_secret_bus_sender_pid(bus, destination))
        guard pid > 0 else { throw Failure(description: "no program owns org.freedesktop.secrets: nothing to import") }
        // The copies' origins name the provider by its executable's path: without it, a second run could not tell
        // what the first copied. A file replaced by an upgrade since the provider started keeps its path.
        guard
            let source = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"))
                .map({ $0.hasSuffix(" (deleted)") ? String($0.dropLast(" (deleted)".count)) : $0 })
        else {
            throw Failure(
                description: "which program owns org.freedesktop.secrets (pid \(pid)) cannot be read: nothing imported")
        }
        if let theirs = ProcessReference.ExecutableFile(runBy: pid),
            theirs == ProcessReference.ExecutableFile(runBy: getpid())
        {
            throw Failure(
                description: "the provider on the bus is lactl itself (pid \(pid)): import from another provider "
                    + "while it runs, before lactl secret-service takes the name over")
        }
        let client = Client(bus: bus)
        var outcome = Outcome(source: source)
        let opened = try client.call(
            SecretServiceProvider.root, SecretServiceProvider.serviceInterface, "OpenSession",
            [.string("plain"), .variant(.string(""))])
        guard let session = opened.last?.string else { throw Failure(description: "OpenSession answered no session") }
        defer {
            _ = try? client.call(session, SecretServiceProvider.sessionInterface, "Close", [])
        }
        let store = KeychainSecrets()
        let present = Set(try store.items(SecretServiceProvider.persisted, fresh: true).compactMap(\.origin))
        let collections =
            try client.property(
                SecretServiceProvider.root, SecretServiceProvider.serviceInterface, "Collections"
            ).members?.compactMap(\.string) ?? []
        for collection in collections {
            let label =
                (try? client.property(collection, SecretServiceProvider.collectionInterface, "Label"))?.string
                ?? collection
            // Locked first: a provider may refuse a locked collection's items.
            if try client.property(collection, SecretServiceProvider.collectionInterface, "Locked") == .boolean(true) {
                let items = try? client.property(collection, SecretServiceProvider.collectionInterface, "Items")
                outcome.locked.append((label, items?.members.map(\.count)))
                continue
            }
            let items =
                try client.property(collection, SecretServiceProvider.collectionInterface, "Items").members?
                .compactMap(\.string) ?? []
            for item in items {
                // With its creation time: a provider may give a later item the path of a deleted one.
                let created = (try? client.property(item, SecretServiceProvider.itemInterface, "Created"))
                    .flatMap { value -> UInt64? in if case .uint64(let time) = value { time } else { nil } }
                let origin = "\(source) \(item)" + (created.map { " created \($0)" } ?? "")
                if present.contains(origin) {
                    outcome.alreadyThere += 1
                    continue
                }
                do {
                    let itemLabel =
                        try client.property(item, SecretServiceProvider.itemInterface, "Label").string ?? ""
                    let attributes =
                        try client.property(item, SecretServiceProvider.itemInterface, "Attributes").stringMap ?? [:]
                    let reply = try client.call(
                        item, SecretServiceProvider.itemInterface, "GetSecret", [.objectPath(session)])
                    guard let parts = reply.first?.members, parts.count == 4, case .bytes(let value) = parts[2],
                        let contentType = parts[3].string
                    else { throw Failure(description: "GetSecret answered no (oayays)") }
                    _ = try store.add(
                        SecretServiceProvider.persisted, label: itemLabel, attributes: attributes,
                        contentType: contentType, secret: SecureBytes(value), origin: origin,
                        trust: trustingNoProgram ? .noProgram : .everyProgram)
                    outcome.imported += 1
                } catch let failure as KeychainSecrets.Failure {
                    throw Failure(description: "\(item): \(failure)")
                } catch {
                    outcome.unreadable.append("\(item): \(error)")
                }
            }
        }
        return outcome
    }

    /// Calls on the other provider, synchronously.
    private struct Client {
        let bus: OpaquePointer

        func call(_ path: String, _ interface: String, _ method: String, _ arguments: [BusValue]) throws
            -> [BusValue]
        {
            var error: UnsafeMutablePointer<CChar>?
            guard
                let reply = la_secret_bus_call(
                    bus, SecretServiceImport.destination, path, interface, method,
                    BusValue.tuple(arguments).gvariant(), &error)
            else {
                defer { g_free(error) }
                throw Failure(description: error.map { String(cString: $0) } ?? "\(method) failed")
            }
            defer { g_variant_unref(reply) }
            guard let value = BusValue(reply), let members = value.members else {
                throw Failure(description: "\(interface).\(method) answered values of types the API never has")
            }
            return members
        }

        func property(_ path: String, _ interface: String, _ name: String) throws -> BusValue {
            let reply = try call(
                path, SecretServiceProvider.propertiesInterface, "Get", [.string(interface), .string(name)])
            guard case .variant(let value)? = reply.first else {
                throw Failure(description: "\(path) has no property \(name)")
            }
            return value
        }
    }
}
