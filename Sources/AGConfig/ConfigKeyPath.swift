/// A position in the configuration tree, rendered as `routes[1].auth`.
public struct ConfigKeyPath: Sendable, Hashable, CustomStringConvertible {
    private var rendered: String

    public static let root = ConfigKeyPath(rendered: "")

    private init(rendered: String) {
        self.rendered = rendered
    }

    public func key(_ name: String) -> ConfigKeyPath {
        ConfigKeyPath(rendered: rendered.isEmpty ? name : rendered + "." + name)
    }

    public func index(_ index: Int) -> ConfigKeyPath {
        ConfigKeyPath(rendered: rendered + "[\(index)]")
    }

    public var description: String { rendered }
}
