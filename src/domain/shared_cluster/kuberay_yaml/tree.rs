//! The first YAML document as a tree of nodes, read event by event under bounds.
//!
//! yaml-rust2's `Parser::load` recurses once per nesting level, and its scanner bounds
//! only flow nesting (`[[[`), so a deep block sequence (`- - - - x`) overflowed the stack.
//! Here the parser is pulled one event at a time and the open collections live on a heap
//! stack that refuses to grow past [`MAX_DEPTH`](super::MAX_DEPTH).

use std::collections::HashMap;
use std::rc::Rc;

use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

use super::scalar::YAML_TAG_PREFIX;
use super::{MAX_DEPTH, MAX_TEXT_NODES, ReadError};

/// A node as the parser saw it, before YAML 1.1 resolution. Shared, so an anchor costs a
/// reference count rather than a copy of its subtree.
pub(super) type Node = Rc<Raw>;

#[derive(Debug)]
pub(super) enum Raw {
    Scalar {
        text: String,
        plain: bool,
        tag: Option<String>,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
    Alias(usize),
}

enum Frame {
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>, Option<Node>),
}

/// The document's root (`None` for an empty stream) and its anchors.
pub(super) struct Tree {
    pub root: Option<Node>,
    pub anchors: HashMap<usize, Node>,
}

#[derive(Default)]
struct Builder {
    stack: Vec<(Frame, usize)>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
    nodes: usize,
}

fn full_tag(tag: Option<Tag>) -> Option<String> {
    tag.map(|t| match t.handle.as_str() {
        "!!" => format!("{YAML_TAG_PREFIX}{}", t.suffix),
        _ => format!("{}{}", t.handle, t.suffix),
    })
}

/// Reads the first document of `text`, refusing it once it nests deeper than
/// `MAX_DEPTH` or holds more than `MAX_TEXT_NODES` nodes.
pub(super) fn read(text: &str) -> Result<Tree, ReadError> {
    let mut parser = Parser::new_from_str(text);
    let mut builder = Builder::default();
    loop {
        let (event, _) = parser
            .next_token()
            .map_err(|e| ReadError::Invalid(format!("not valid YAML: {e}")))?;
        match event {
            Event::StreamEnd | Event::DocumentEnd => break,
            event => builder.on_event(event)?,
        }
    }
    Ok(Tree {
        root: builder.root,
        anchors: builder.anchors,
    })
}

impl Builder {
    fn on_event(&mut self, event: Event) -> Result<(), ReadError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == TScalarStyle::Plain;
                let tag = full_tag(tag);
                self.add(Raw::Scalar { text, plain, tag }, anchor)
            }
            Event::Alias(id) => {
                if !self.anchors.contains_key(&id) {
                    return Err(ReadError::Invalid(
                        "an alias refers to an unfinished anchor".into(),
                    ));
                }
                self.add(Raw::Alias(id), 0)
            }
            Event::SequenceStart(anchor, _) => self.open(Frame::Seq(Vec::new()), anchor),
            Event::MappingStart(anchor, _) => self.open(Frame::Map(Vec::new(), None), anchor),
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some((Frame::Seq(items), anchor)) => self.add(Raw::Seq(items), anchor),
                Some((Frame::Map(pairs, _), anchor)) => self.add(Raw::Map(pairs), anchor),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn open(&mut self, frame: Frame, anchor: usize) -> Result<(), ReadError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(ReadError::Bound(format!(
                "nested deeper than {MAX_DEPTH} levels"
            )));
        }
        self.stack.push((frame, anchor));
        Ok(())
    }

    fn add(&mut self, node: Raw, anchor: usize) -> Result<(), ReadError> {
        self.nodes += 1;
        if self.nodes > MAX_TEXT_NODES {
            return Err(ReadError::Bound(format!(
                "more than {MAX_TEXT_NODES} nodes"
            )));
        }
        let node = Rc::new(node);
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some((Frame::Seq(items), _)) => items.push(node),
            Some((Frame::Map(pairs, key), _)) => match key.take() {
                None => *key = Some(node),
                Some(k) => pairs.push((k, node)),
            },
        }
        Ok(())
    }
}
