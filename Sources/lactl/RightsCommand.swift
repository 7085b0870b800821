import ArgumentParser
import Foundation
import KeychainServices
import LocalAuthentication
import SecurityClient

/// `lactl rights …`: the rights `LARightStore` keeps (a record, an enclave key and a secret each).
struct Rights: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List and remove the rights applications saved with LARightStore.",
        subcommands: [ListRights.self, RemoveRight.self])
}

/// `lactl rights list`: one line per right: identifier, access group, requirement. Never shows secrets. Through
/// localauthd the rights are other applications' items: the user is asked first.
struct ListRights: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List saved rights: identifier, access group and requirement.")

    @OptionGroup var options: KeychainOptions

    func run() async throws {
        let client = try options.client(reaching: .everyGroup)
        let rights = try KeychainClientSelection.$current.withValue(client) { try LARightStore.shared.listing() }
        if rights.isEmpty {
            print("No rights are saved.")
            return
        }
        for right in rights {
            print("\(right.identifier)\t\(right.accessGroup)\t\(right.requirement)")
        }
    }
}

/// `lactl rights remove <identifier>`: removes the right, its key and its secret (in every access group that has
/// one under this identifier, since lactl sees them all; through localauthd after asking the user).
struct RemoveRight: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove a saved right with its key and secret.")

    @OptionGroup var options: KeychainOptions

    @Argument(help: "The right's identifier.")
    var identifier: String

    func run() async throws {
        let client = try options.client(reaching: .everyGroup)
        do {
            try await KeychainClientSelection.$current.withValue(client) {
                try await LARightStore.shared.removeRight(forIdentifier: identifier)
            }
        } catch {
            let status = (error as NSError).code
            FileHandle.standardError.write(Data("lactl rights remove: \(error.localizedDescription)\n".utf8))
            throw ExitCode(Int32(status) == errSecItemNotFound ? 44 : 1)
        }
        print("Removed right \"\(identifier)\".")
    }
}
