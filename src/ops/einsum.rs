//! einsum, lowered to diagonal / sum / permute / reshape / bmm.

use crate::{Error, Result, Tensor};

fn parse(eq: &str, n: usize) -> Result<(Vec<Vec<char>>, Vec<char>)> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    if eq.contains("...") {
        return Err(Error::arg(
            "einsum",
            "ellipsis ('...') is not supported yet; spell the dimensions out",
        ));
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let ins: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    if ins.len() != n {
        return Err(Error::arg(
            "einsum",
            format!(
                "the equation names {} operands but {n} were given",
                ins.len()
            ),
        ));
    }
    for s in ins.iter().flatten() {
        if !s.is_ascii_alphabetic() {
            return Err(Error::arg(
                "einsum",
                format!("invalid subscript '{s}' in \"{eq}\""),
            ));
        }
    }
    let out = match rhs {
        Some(r) => r.chars().collect(),
        None => {
            let mut all: Vec<char> = ins.iter().flatten().copied().collect();
            all.sort();
            let mut once: Vec<char> = all
                .iter()
                .copied()
                .filter(|c| all.iter().filter(|x| *x == c).count() == 1)
                .collect();
            once.dedup();
            once
        }
    };
    Ok((ins, out))
}

/// Take diagonals for repeated subscripts, then sum subscripts nobody else needs.
fn simplify(t: &Tensor, subs: &[char], keep: &[char]) -> Result<(Tensor, Vec<char>)> {
    let mut t = t.clone();
    let mut s: Vec<char> = subs.to_vec();
    loop {
        let dup = s.iter().enumerate().find_map(|(i, c)| {
            s[i + 1..]
                .iter()
                .position(|x| x == c)
                .map(|j| (i, i + 1 + j))
        });
        let Some((i, j)) = dup else { break };
        let c = s[i];
        t = t.diagonal(i as isize, j as isize)?;
        s.remove(j);
        s.remove(i);
        s.push(c);
    }
    let drop: Vec<isize> = s
        .iter()
        .enumerate()
        .filter(|(_, c)| !keep.contains(c))
        .map(|(i, _)| i as isize)
        .collect();
    if !drop.is_empty() {
        t = t.sum_dims(&drop, false)?;
        s.retain(|c| keep.contains(c));
    }
    Ok((t, s))
}

fn permute_to(t: &Tensor, from: &[char], to: &[char]) -> Result<Tensor> {
    let p: Vec<isize> = to
        .iter()
        .map(|c| from.iter().position(|x| x == c).unwrap() as isize)
        .collect();
    t.permute(&p)
}

impl Tensor {
    /// Einstein summation over one or more operands (torch.einsum), including repeated subscripts
    /// (traces, diagonals).
    ///
    /// ```
    /// use wgtorch::{Device, Tensor};
    /// let a = Tensor::eye(3, &Device::Cpu)?;
    /// assert_eq!(Tensor::einsum("ii->", &[a])?.item()?, 3.0);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn einsum(equation: &str, operands: &[Tensor]) -> Result<Tensor> {
        let (ins, out) = parse(equation, operands.len())?;
        let mut sizes = std::collections::HashMap::new();
        for (t, s) in operands.iter().zip(&ins) {
            if t.ndim() != s.len() {
                return Err(Error::shape(
                    "einsum",
                    format!(
                        "the subscripts \"{}\" name {} dimensions but the operand has shape {:?}",
                        s.iter().collect::<String>(),
                        s.len(),
                        t.shape()
                    ),
                ));
            }
            for (c, &n) in s.iter().zip(t.shape()) {
                if let Some(&m) = sizes.get(c) {
                    if m != n {
                        return Err(Error::shape(
                            "einsum",
                            format!(
                                "subscript '{c}' has size {n} for one operand and {m} for another"
                            ),
                        ));
                    }
                }
                sizes.insert(*c, n);
            }
        }
        for c in &out {
            if !sizes.contains_key(c) {
                return Err(Error::arg(
                    "einsum",
                    format!("output subscript '{c}' does not appear in the inputs"),
                ));
            }
        }
        // Fold operands left to right.
        let mut acc: Option<(Tensor, Vec<char>)> = None;
        for (k, (t, s)) in operands.iter().zip(&ins).enumerate() {
            let mut keep: Vec<char> = out.clone();
            for r in &ins[k + 1..] {
                keep.extend(r);
            }
            if let Some((_, ref accs)) = acc {
                keep.extend(accs);
            }
            let (t, s) = simplify(t, s, &keep)?;
            acc = Some(match acc {
                None => (t, s),
                Some((a, asubs)) => {
                    let mut later: Vec<char> = out.clone();
                    for r in &ins[k + 1..] {
                        later.extend(r);
                    }
                    contract(&a, &asubs, &t, &s, &later)?
                }
            });
            if let Some((t, s)) = acc.take() {
                let mut keep: Vec<char> = out.clone();
                for r in &ins[k + 1..] {
                    keep.extend(r);
                }
                acc = Some(simplify(&t, &s, &keep)?);
            }
        }
        let (t, s) = acc.expect("at least one operand");
        permute_to(&t, &s, &out)
    }
}

/// Contract two operands over their shared subscripts that `later` does not need.
fn contract(
    a: &Tensor,
    sa: &[char],
    b: &Tensor,
    sb: &[char],
    later: &[char],
) -> Result<(Tensor, Vec<char>)> {
    let batch: Vec<char> = sa
        .iter()
        .copied()
        .filter(|c| sb.contains(c) && later.contains(c))
        .collect();
    let summed: Vec<char> = sa
        .iter()
        .copied()
        .filter(|c| sb.contains(c) && !later.contains(c))
        .collect();
    let left: Vec<char> = sa.iter().copied().filter(|c| !sb.contains(c)).collect();
    let right: Vec<char> = sb.iter().copied().filter(|c| !sa.contains(c)).collect();
    let size = |t: &Tensor, s: &[char], cs: &[char]| -> usize {
        cs.iter()
            .map(|c| t.shape()[s.iter().position(|x| x == c).unwrap()])
            .product()
    };
    let (nb, nl, nc, nr) = (
        size(a, sa, &batch),
        size(a, sa, &left),
        size(a, sa, &summed),
        size(b, sb, &right),
    );
    let ao: Vec<char> = batch.iter().chain(&left).chain(&summed).copied().collect();
    let bo: Vec<char> = batch.iter().chain(&summed).chain(&right).copied().collect();
    let a3 = permute_to(a, sa, &ao)?.reshape([nb, nl, nc])?;
    let b3 = permute_to(b, sb, &bo)?.reshape([nb, nc, nr])?;
    let c = a3.matmul(&b3)?;
    let mut shape: Vec<usize> = Vec::new();
    for (t, s, cs) in [(a, sa, &batch), (a, sa, &left), (b, sb, &right)] {
        for c in cs.iter() {
            shape.push(t.shape()[s.iter().position(|x| x == c).unwrap()]);
        }
    }
    let subs: Vec<char> = batch.iter().chain(&left).chain(&right).copied().collect();
    Ok((c.reshape(&shape)?, subs))
}
