import Foundation
import PackagePlugin

/// Writes, for the test target it is applied to, a table of every string constant its direct dependencies export
/// (`public let kSec… = ConstantString(…)`, `public let kLA… = "…"`, `SecKeyAlgorithm`'s members), read from their
/// sources at build time by `scripts/list-exported-constants`. A constant added to a module is in the table, and so
/// in the tests that walk it, without editing them.
@main
struct ExportedConstantTable: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let modules = target.dependencies.compactMap { dependency -> SourceModuleTarget? in
            guard case .target(let target) = dependency else { return nil }
            return target.sourceModule
        }
        let sources = modules.flatMap { module in
            module.sourceFiles(withSuffix: "swift").map { (module: module.moduleName, file: $0.url) }
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "ExportedConstants.swift")
        let script = context.package.directoryURL.appending(path: "scripts/list-exported-constants")
        return [
            .buildCommand(
                displayName: "Listing the string constants \(target.name)'s dependencies export",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: [script.path, output.path] + sources.map { "\($0.module)=\($0.file.path)" },
                inputFiles: [script] + sources.map(\.file),
                outputFiles: [output])
        ]
    }
}
